export { ObjectivePlot, type ObjectivePlotView } from "./components/objective-plot";
export { RunsTable, type RunFilter } from "./components/runs-table";
export { StudiesTable } from "./components/studies-table";
export { StudyActions } from "./components/study-actions";
export { StudyProgress } from "./components/study-progress";
export { studyKeys, useActiveRuns, useStudies, useStudy, useStudyRuns } from "./hooks/use-studies";
