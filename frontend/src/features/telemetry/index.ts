export { ResidualOverlay, type OverlayRun } from "./components/residual-overlay";
export { ResidualPlot } from "./components/residual-plot";
export { ResourcePlot } from "./components/resource-plot";
export { ForcesPlot } from "./components/series-plot";
export { useRunTelemetry, useRunsTelemetry } from "./hooks/use-run-telemetry";
