import type { Run } from "@/lib/types";

/**
 * How a run is named among others shown together: "Run 3" when they are all of one study,
 * "NACA polar · run 3" when they come from several (run indexes repeat across studies).
 */
export function runName(run: Run, among: readonly Run[]): string {
  const oneStudy = among.every((r) => r.study === run.study);
  return oneStudy ? `Run ${run.index}` : `${run.study_name ?? "study"} · run ${run.index}`;
}
