import type { RunState, StudyState } from "./types";

export const RUN: Record<RunState, { label: string; color: string }> = {
  pending: { label: "Queued", color: "gray" },
  admitted: { label: "Admitted", color: "cyan" },
  provisioning: { label: "Provisioning", color: "cyan" },
  running: { label: "Running", color: "blue" },
  completed: { label: "Completed", color: "teal" },
  failed: { label: "Failed", color: "red" },
  cancelled: { label: "Cancelled", color: "orange" },
};

export const STUDY: Record<StudyState, { label: string; color: string }> = {
  draft: { label: "Draft", color: "gray" },
  submitted: { label: "Queued", color: "gray" },
  running: { label: "Running", color: "blue" },
  completed: { label: "Completed", color: "teal" },
  completed_with_failures: { label: "Partly failed", color: "yellow" },
  cancelled: { label: "Cancelled", color: "orange" },
  deleting: { label: "Deleting", color: "gray" },
};

export const runStateLabel = (s: RunState) => RUN[s]?.label ?? s;
export const runStateColor = (s: RunState) => RUN[s]?.color ?? "gray";
export const RUN_STATES = Object.keys(RUN) as RunState[];
/** the states a study in a list can be in (one being deleted is in no list) */
export const STUDY_STATES = (Object.keys(STUDY) as StudyState[]).filter((s) => s !== "deleting");
export const studyStateLabel = (s: StudyState) => STUDY[s]?.label ?? s;
