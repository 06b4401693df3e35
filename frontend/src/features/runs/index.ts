export { LogTail } from "./components/log-tail";
export { WaitReason } from "./components/wait-reason";
export { runKeys, useCancelRun, useRun } from "./hooks/use-run";
