import { formatInt } from "@/lib/format";
import type { RunState, Study } from "@/lib/types";

const ENDED = ["completed", "failed", "cancelled"] as const;

/**
 * What ended, each way apart: "7 completed · 2 failed · 9,991 cancelled of 10,000". An ended
 * run is not a success, so there is no single "done" figure.
 */
export function progressSummary(progress: Study["progress"], total?: number): string {
  const by = progress.by_state as Partial<Record<RunState, number>>;
  const ended = ENDED.filter((s) => by[s]).map((s) => `${formatInt(by[s])} ${s}`);
  const of = formatInt(progress.total || total || 0);
  return `${ended.length ? ended.join(" · ") : "none ended"} of ${of}`;
}

/**
 * A cancel still ending a large study's queued runs in the background: "cancelling: 40,000
 * of 100,000" (none of them starts meanwhile; they count as cancelled already).
 */
export function cancellingSummary(progress: Study["progress"]): string {
  const cancelled = progress.cancelled ?? 0;
  return `cancelling: ${formatInt(cancelled - progress.cancelling)} of ${formatInt(cancelled)}`;
}
