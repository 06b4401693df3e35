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
};

export const runStateLabel = (s: RunState) => RUN[s]?.label ?? s;
export const runStateColor = (s: RunState) => RUN[s]?.color ?? "gray";
export const RUN_STATES = Object.keys(RUN) as RunState[];
export const STUDY_STATES = Object.keys(STUDY) as StudyState[];
export const studyStateLabel = (s: StudyState) => STUDY[s]?.label ?? s;
