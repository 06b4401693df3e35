export { ObjectivePlot } from "./components/objective-plot";
export { plotQueryFor, plotTraces, type ObjectivePlotView } from "./lib/plot-traces";
export { ContinueSelectedButton } from "./components/continue-runs";
export { RunsTable } from "./components/runs-table";
export { StudiesTable } from "./components/studies-table";
export { StudyActions } from "./components/study-actions";
export { StudyProgress } from "./components/study-progress";
export { MeshIndependencePanel } from "./components/mesh-independence";
export { ParetoFrontPanel } from "./components/pareto-front";
export { isFrontStudy } from "./lib/pareto-traces";
export { SensitivityPanel } from "./components/sensitivity";
export { SurrogateMap } from "./components/surrogate-map";
export {
  describeRunFilter,
  runQueryFromSearch,
  runQueryToSearch,
  RUNS_PAGE_SIZE,
  type RangeFilter,
  type RunQuery,
} from "./lib/run-query";
export {
  MAX_SELECTED_RUNS,
  runsPageState,
  useRunQueryInUrl,
  useRunSelectionInUrl,
  useRunsPage,
  useSelectedRuns,
  useStudyPlot,
  useStudyRunsPage,
  useStudySurrogate,
} from "./hooks/use-runs-table";
export { StudyDeletions } from "./components/study-deletions";
export {
  studyKeys,
  useActiveRuns,
  useStudies,
  useStudy,
  useStudyDeletions,
} from "./hooks/use-studies";
