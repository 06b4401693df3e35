export { CompareTable } from "./components/compare-table";
export { CpPlot } from "./components/cp-plot";
export { FieldCompare, type FieldRun } from "./components/field-compare";
export { FlowFields } from "./components/field-view";
export { ObjectivePolar } from "./components/objective-polar";
export { StudyResultsPanel } from "./components/study-results-panel";
export { useRunsByIds } from "./hooks/use-results";
export { COMPARE_MAX, COMPARE_MIN, compareHref } from "./lib/field-traces";
export { runName } from "./lib/run-names";
