/**
 * The API's types under short names, all of them the generated client's (src/generated,
 * from the backend's OpenAPI schema, where every JSON field is typed by its JSON Schema).
 */
import type { components } from "@/generated/api";

type Schemas = components["schemas"];

export type RunState = Schemas["RunStateEnum"];
export type StudyState = Schemas["StudyStateEnum"];

/**
 * The study spec and its parts come from the one JSON Schema the backend validates with
 * (backend/studies/schemas/study-spec.json, published as OpenAPI components).
 */
export type StudySpec = Schemas["StudySpec"];
export type ParameterSpec = Schemas["ParameterSpec"];
export type ObjectiveSpec = Schemas["ObjectiveSpec"];
/** The study's convergence policy (backend: telemetry/convergence.py, docs/live.md). */
export type ConvergencePolicy = Schemas["ConvergencePolicy"];
export type RunResources = Schemas["RunResources"];
export type PrepareUtility = Schemas["PrepareUtility"];
export type Scalar = Schemas["Scalar"];
/** When a run's result is trusted: final residuals, objectives' drift, over a window. */
export type TrustRules = Schemas["TrustRules"];

export type Trust = Schemas["TrustEnum"] | "";

export type Run = Schemas["Run"];
export type RunDetail = Schemas["RunDetail"];
/** The evidence behind a run's trust flag (who said it converged, and why). */
export type TrustDetail = Schemas["TrustDetail"];

/** A run's provenance (docs/provenance.md). */
export type Provenance = Schemas["Provenance"];

/** Whether and from which writes an ended run may go on, and where its attempt went on from. */
export type Continuation = Schemas["Continuation"];
/** Who made the run go on from an earlier attempt's write, and with what changed. */
export type ResumedFrom = Schemas["ResumedFrom"];
/** The agent's record of the same (the run's provenance). */
export type AgentResume = Schemas["AgentResume"];
/** Go on from a write: more iterations (continue), or an earlier write with changed settings. */
export type ContinueRequest = Schemas["ContinueRequest"];
export type StudyContinueRequest = Schemas["StudyContinueRequest"];
/** What a study's selection did: the runs queued again, and those skipped with the reason. */
export type ContinuedRuns = Schemas["Continued"];
export type SkippedRun = Schemas["SkippedRun"];

/** The objective plot's data (`GET /studies/{id}/plot/`): points, bins or a heat map. */
export type StudyPlot = Schemas["Plot"];
export type PlotGroup = Schemas["PlotGroup"];

/** An adaptive study's surrogate (`GET /studies/{id}/surrogate/`): its map and progress. */
export type StudySurrogate = Schemas["Surrogate"];
export type MeshIndependence = Schemas["MeshIndependence"];
export type GridConvergence = Schemas["Gci"];
/** Which parameters each objective depends on (`GET /studies/{id}/sensitivity/`): Sobol indices. */
export type Sensitivity = Schemas["Sensitivity"];
export type SensitivityObjective = Schemas["SensitivityObjective"];
/**
 * The trade-off between two or three objectives (`GET /studies/{id}/pareto/`): every
 * completed run's values, which are on the Pareto front, and the front's hypervolume.
 */
export type Pareto = Schemas["Front"];
export type ParetoRun = Schemas["FrontRun"];
export type ParetoObjective = Schemas["FrontObjective"];
/** A range an objective must keep (`Cl ≥ 0.5`): a run outside it is never on the front. */
export type ParetoConstraint = Schemas["Constraint"];
/** Which way an objective is better: max or min. */
export type Direction = Schemas["DirectionEnum"];
export type SurrogateGrid = Schemas["SurrogateGrid"];
export type SurrogateProgress = Schemas["SurrogateProgress"];

/** A study's effective resources per run: the spec's, else the template's, else 1. */
export type EffectiveResources = Schemas["EffectiveResources"];

export type Study = Schemas["Study"];
export type StudyDeletion = Schemas["StudyDeletion"];

export type ResourceAmounts = Schemas["Amounts"];

/** Where an effective limit comes from: "portal quota", "backend capacity", "cloud project limit". */
export type LimitSource = Schemas["SourceEnum"];
/** Per backend the tenant may use: each limit's value and where it comes from (catalog/cloud.py). */
export type EffectiveBackend = Schemas["EffectiveBackend"];

/** The quota panel: limits, usage, queued demand, per-backend limits, core-hours, storage. */
export type QuotaSnapshot = Schemas["Quota"];

/** What a study would take of the quota, and how many of its runs fit at once. */
export type QuotaImpact = Schemas["QuotaImpact"];

export type PreviewStep = Schemas["PreviewStep"];
export type Preview = Schemas["Preview"];
/** An adaptive spec's batches after its first runs, as the preview tells them. */
export type PreviewAdaptive = Schemas["PreviewAdaptive"];

export type TemplateParameter = Schemas["TemplateParameter"];
export type CaseTemplate = Schemas["Template"];
export type SolverPackage = Schemas["Package"];

export type Backend = Schemas["Backend"];
export type Upload = Schemas["Upload"];
export type CaseInspection = Schemas["Inspection"];
export type Me = Schemas["Me"];

export type TelemetrySeries = Schemas["TelemetrySeries"];
export type Telemetry = Schemas["Telemetry"];

export const ACTIVE_RUN_STATES: readonly RunState[] = [
  "pending",
  "admitted",
  "provisioning",
  "running",
];
export const TERMINAL_RUN_STATES: readonly RunState[] = ["completed", "failed", "cancelled"];

export function isActiveRun(state: RunState | undefined): boolean {
  return !!state && ACTIVE_RUN_STATES.includes(state);
}

export function isActiveStudy(state: StudyState | undefined): boolean {
  return state === "submitted" || state === "running";
}
