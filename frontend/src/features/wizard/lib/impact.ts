import { plural } from "@/lib/format";
import type { QuotaImpact } from "@/lib/types";

/**
 * "120 runs × 4 cores: 16 at a time (set by your quota of 64 cores), about 8 waves": how
 * many run at once, and what sets that number (the tenant's quota, the backend's capacity or
 * its cloud project, named by the server as `limited_by`). When a single run does not fit,
 * which limit it does not fit (`refused_by`: the tenant's quota, the backend, its cloud).
 */
export function impactSentence(runs: number, q: QuotaImpact): string {
  const head = `${plural(runs, "run")} × ${plural(q.per_run.cores, "core")}`;
  if (q.storage_full) return `${head}: your storage quota is used up; save it as a draft for now`;
  if (!q.fits) return `${head}: a single run does not fit ${q.refused_by || "its limits"}`;
  const by = q.limited_by ? ` (set by ${q.limited_by})` : "";
  if (runs <= q.concurrent_runs) return `${head}: all at once`;
  return `${head}: ${q.concurrent_runs} at a time${by}, about ${plural(q.waves ?? 0, "wave")}`;
}
