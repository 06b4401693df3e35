export { ContinueRunButton } from "./components/continue-run";
export { LogTail } from "./components/log-tail";
export { RunObjectives } from "./components/run-objectives";
export { ProvenancePanel } from "./components/provenance-panel";
export { RerunBlock } from "./components/rerun-block";
export { ResumedFromNote } from "./components/resumed-from";
export { WaitReason } from "./components/wait-reason";
export { runKeys, useCancelRun, useRun } from "./hooks/use-run";
