import { plural } from "@/lib/format";
import type { QuotaImpact } from "@/lib/types";

/** "120 runs × 4 cores: runs in about 8 waves within your 64-core quota" */
export function impactSentence(runs: number, q: QuotaImpact): string {
  const head = `${plural(runs, "run")} × ${plural(q.per_run.cores, "core")}`;
  if (!q.fits) return `${head}: a single run does not fit your quota`;
  if (runs <= q.concurrent_runs)
    return `${head}: all at once within your ${q.limits.cores}-core quota`;
  return `${head}: runs in about ${plural(q.waves ?? 0, "wave")} within your ${q.limits.cores}-core quota (${q.concurrent_runs} at a time)`;
}
