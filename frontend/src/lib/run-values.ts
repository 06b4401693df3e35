import { formatNumber } from "./format";
import type { Run } from "./types";

type Values = Record<string, number | null | undefined> | null | undefined;

/**
 * The swing (±, half its peak-to-peak) of an averaged objective whose window oscillates
 * beyond the study's tolerance (trust_detail.oscillation); null when it does not.
 */
export function objectiveSwing(run: Pick<Run, "trust_detail">, name: string): number | null {
  const m = run.trust_detail?.oscillation?.[name];
  return m?.oscillating ? m.amplitude : null;
}

/**
 * An objective's value as a result: "—" when the run has none (it did not complete, or the
 * objective could not be computed), with its swing when it oscillates ("1.21 ± 0.18").
 */
export function formatObjective(
  run: Pick<Run, "objectives" | "trust_detail">,
  name: string,
  digits = 4,
): string {
  const value = (run.objectives as Values)?.[name];
  const text = formatNumber(value, digits);
  const swing = objectiveSwing(run, name);
  return value != null && swing != null ? `${text} ± ${formatNumber(swing, 2)}` : text;
}

/** Whether an ended run has results: it ran to its end or converged early. */
export function runCompleted(run: Pick<Run, "state" | "end_reason">): boolean {
  return run.state === "completed" && ["success", "converged"].includes(run.end_reason ?? "");
}
