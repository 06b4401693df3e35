/**
 * The API's types under short names, and narrow views of payloads whose schema is loose
 * (JSON dict fields come out of the generated client as `unknown`). Everything here is
 * derived from the generated types.
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

export type Trust = Schemas["TrustEnum"] | "";

export type Run = Omit<Schemas["Run"], "parameters" | "objectives"> & {
  parameters: Record<string, Scalar>;
  objectives: Record<string, number | null>;
};

export type RunDetail = Omit<Schemas["RunDetail"], "parameters" | "objectives" | "context"> & {
  parameters: Record<string, Scalar>;
  objectives: Record<string, number | null>;
  context: Record<string, Scalar>;
};

/** A run's provenance (docs/provenance.md). */
export type Provenance = Schemas["Provenance"];

/** The objective plot's data (`GET /studies/{id}/plot/`): points, bins or a heat map. */
export type StudyPlot = Omit<Schemas["Plot"], "mode"> & { mode: "points" | "binned" | "heatmap" };
export type PlotGroup = Schemas["PlotGroup"];

/** An adaptive study's surrogate (`GET /studies/{id}/surrogate/`): its map and progress. */
export type StudySurrogate = Omit<Schemas["Surrogate"], "grid" | "samples"> & {
  grid?: SurrogateGrid | null;
  samples?: (Record<string, number> & { batch: number })[];
};
export type SurrogateGrid = Omit<Schemas["SurrogateGrid"], "objectives"> & {
  objectives: Record<string, { mean: number[][]; std: number[][] }>;
};
export type SurrogateProgress = Schemas["SurrogateProgress"];

/** A study's effective resources per run: the spec's, else the template's, else 1. */
export type EffectiveResources = Required<RunResources>;

export type Study = Omit<Schemas["Study"], "objectives" | "resources"> & {
  objectives: Record<string, ObjectiveSpec>;
  resources: EffectiveResources;
};

export interface ResourceAmounts {
  cores: number;
  memory_gb: number;
  nodes: number;
  runs: number;
}

/** Where an effective limit comes from: "portal quota", "backend capacity", "cloud project limit". */
export type LimitSource = Schemas["SourceEnum"];
/** Per backend the tenant may use: each limit's value and where it comes from (catalog/cloud.py). */
export type EffectiveBackend = Schemas["EffectiveBackend"];

export interface QuotaSnapshot {
  tenant: string;
  limits: ResourceAmounts & { storage_gb?: number; core_hours_budget?: number | null };
  usage: ResourceAmounts;
  queued: ResourceAmounts;
  backends: EffectiveBackend[];
  /** Core-hours the tenant's runs used this period (the calendar month, UTC), and the budget. */
  core_hours?: Schemas["CoreHours"];
  /** What the portal stores for the tenant (uploads, result archives), and the limit. */
  storage?: Schemas["Storage"];
}

export interface QuotaImpact {
  per_run: { cores: number; memory_gb: number; nodes: number };
  total: { cores: number; memory_gb: number; nodes: number };
  limits: { cores: number; memory_gb: number; nodes: number; runs: number; storage_gb?: number };
  /** storage_gb: what the portal stores for the tenant now (uploads, archives, run directories) */
  in_use: ResourceAmounts & { storage_gb?: number };
  concurrent_runs: number;
  /** what sets concurrent_runs: "your quota of 4 cores", "backend local's 2 cores", … */
  limited_by?: string;
  waves: number | null;
  fits: boolean;
  /** the storage quota is used up: a submission is refused (a draft may be saved) */
  storage_full?: boolean;
  problem: string | null;
  summary: string;
}

export interface PreviewStep {
  name: string;
  argv: string[];
  role: string;
}

export interface Preview {
  run_count: number;
  /** runs whose values the preview checked: run_count, or the first ones of a huge space */
  checked_runs: number;
  parameters: string[];
  rows: { index: number; parameters: Record<string, Scalar>; context: Record<string, Scalar> }[];
  solver: string;
  backend: string;
  resources: EffectiveResources;
  steps: PreviewStep[];
  objectives: Record<string, ObjectiveSpec>;
  quota: QuotaImpact;
}

export interface TemplateParameter {
  type?: "float" | "int" | "str";
  unit?: string;
  default?: Scalar;
  min?: number;
  max?: number;
  choices?: Scalar[];
  description?: string;
}

export interface CaseTemplate {
  name: string;
  title: string;
  description: string;
  solver: string;
  solvers: string[];
  resources: RunResources;
  parameters: Record<string, TemplateParameter>;
  derived: Record<string, string>;
  objectives: Record<string, ObjectiveSpec>;
  demo: Pick<StudySpec, "parameters" | "combine">;
  /** What the template's case will do: its solver, the series its runs send (docs/api.md). */
  inspection?: CaseInspection | null;
}

export interface RunConfiguration {
  argv?: string[];
  steps?: { name: string; argv: string[]; role?: string }[];
  description?: string;
}

export interface SolverPackage {
  name: string;
  version: string;
  description: string;
  depends: unknown;
  provides: { solvers?: string[]; utilities?: string[] };
  run_configurations: Record<string, RunConfiguration>;
}

export type Backend = Schemas["Backend"];
export type Upload = Schemas["Upload"];
export type CaseInspection = Schemas["Inspection"];
export type Me = Schemas["Me"];

export interface TelemetrySeries {
  x: number[];
  y: number[];
  points: number;
  returned: number;
}

export interface Telemetry {
  run: string;
  attempt: number;
  /** the run stream's seq this snapshot includes: apply live events after it */
  last_seq: number;
  available: string[];
  series: Record<string, TelemetrySeries>;
}

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
