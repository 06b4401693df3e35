/**
 * Narrow views of API payloads whose schema is loose (JSON dict fields come out of the
 * generated client as `unknown`). Everything here is derived from the generated types.
 */
import type { components } from "@/generated/api";

type Schemas = components["schemas"];

export type RunState = Schemas["RunStateEnum"];
export type StudyState = Schemas["StudyStateEnum"];
export type Scalar = number | string | boolean;

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

export type Study = Omit<Schemas["Study"], "objectives" | "spec" | "resources"> & {
  objectives: Record<string, ObjectiveSpec>;
  spec: StudySpec;
  resources: { processes: number; nodes: number; memory_gb: number };
};

export type ParameterSpec =
  | { values: Scalar[] }
  | { range: [number, number, number] }
  | { linspace: [number, number, number] }
  | { value: Scalar }
  | { min: number; max: number; integer?: boolean };

export type ObjectiveSpec =
  { series: string; reduce: "last" | "mean_last" | "min" | "max"; n?: number } | { expr: string };

/** The study's convergence policy (backend: telemetry/convergence.py, docs/live.md). */
export interface ConvergencePolicy {
  diverge?: { nan?: boolean; residual_above?: number; courant_above?: number };
  converge?: {
    residuals_below?: number;
    objective?: { series: string; window: number; tolerance: number };
  };
  min_iterations?: number;
  max_wall_seconds?: number;
}

export interface StudySpec {
  name: string;
  description?: string;
  template?: string;
  case?: string;
  solver?: string;
  backend?: string;
  resources?: { processes?: number; nodes?: number; memory_gb?: number };
  parameters?: Record<string, ParameterSpec>;
  combine?: "grid" | "zip" | "lhs" | "random";
  samples?: number;
  seed?: number;
  derived?: Record<string, string>;
  objectives?: Record<string, ObjectiveSpec>;
  convergence?: ConvergencePolicy;
  prepare?: string[][];
}

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
}

export interface QuotaImpact {
  per_run: { cores: number; memory_gb: number; nodes: number };
  total: { cores: number; memory_gb: number; nodes: number };
  limits: { cores: number; memory_gb: number; nodes: number; runs: number };
  in_use: ResourceAmounts;
  concurrent_runs: number;
  waves: number | null;
  fits: boolean;
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
  parameters: string[];
  rows: { index: number; parameters: Record<string, Scalar>; context: Record<string, Scalar> }[];
  solver: string;
  backend: string;
  resources: { processes: number; nodes: number; memory_gb: number };
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
  resources: { processes?: number; memory_gb?: number; nodes?: number };
  parameters: Record<string, TemplateParameter>;
  derived: Record<string, string>;
  objectives: Record<string, ObjectiveSpec>;
  demo: { parameters?: Record<string, ParameterSpec>; combine?: string };
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
