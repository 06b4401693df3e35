/**
 * The new-study form: its state, and the form made from a template, an uploaded case or a
 * saved spec. Pure functions: the wizard's components render this state; `to-spec.ts`
 * translates it into the study spec (docs/study-spec.md) and `series.ts` checks the series
 * it names against what the case writes.
 */
import { objectiveRows, type ObjectiveRow } from "@/lib/objectives";
import { adaptiveForm, emptyAdaptive, type AdaptiveForm } from "./adaptive";
import type {
  CaseTemplate,
  ConvergencePolicy,
  ParameterSpec,
  StudySpec,
  TemplateParameter,
  Upload,
} from "@/lib/types";

export type ParamMode = "fixed" | "values" | "range" | "linspace" | "sampled";
/** How the parameters make runs (the spec's `combine`). */
export type Combine = NonNullable<StudySpec["combine"]>;
export interface ParamRow {
  key: string;
  name: string;
  mode: ParamMode;
  value: string;
  values: string;
  start: string;
  stop: string;
  step: string;
  count: string;
  min: string;
  max: string;
  integer: boolean;
  /** the template's definition, when the case is a template */
  def?: TemplateParameter;
}

export interface DerivedRow {
  key: string;
  name: string;
  expr: string;
}

export interface ConvergenceForm {
  /** stop a run whose residuals become NaN (the portal's default) */
  nan: boolean;
  residualAboveOn: boolean;
  residualAbove: string;
  courantAboveOn: boolean;
  courantAbove: string;
  residualsBelowOn: boolean;
  residualsBelow: string;
  objectiveOn: boolean;
  objectiveSeries: string;
  window: string;
  tolerance: string;
  minIterations: string;
  maxWallOn: boolean;
  maxWallMinutes: string;
}

export interface WizardForm {
  name: string;
  description: string;
  source: "template" | "upload";
  template: string | null;
  upload: Upload | null;
  parameters: ParamRow[];
  combine: Combine;
  samples: string;
  seed: string;
  /** combine: adaptive: its budget, batches and goal */
  adaptive: AdaptiveForm;
  derived: DerivedRow[];
  solver: string | null;
  backend: string | null;
  processes: number;
  nodes: number;
  memoryGb: number;
  /** each run starts from the nearest completed run's fields (steady solvers only) */
  warmStart: boolean;
  objectives: ObjectiveRow[];
  convergence: ConvergenceForm;
}

let counter = 0;
export const newKey = () => `k${++counter}`;

export const emptyConvergence = (): ConvergenceForm => ({
  nan: true,
  residualAboveOn: false,
  residualAbove: "1e3",
  courantAboveOn: false,
  courantAbove: "5",
  residualsBelowOn: false,
  residualsBelow: "1e-5",
  objectiveOn: false,
  objectiveSeries: "",
  window: "50",
  tolerance: "1e-4",
  minIterations: "",
  maxWallOn: false,
  maxWallMinutes: "60",
});

export function emptyForm(): WizardForm {
  return {
    name: "",
    description: "",
    source: "template",
    template: null,
    upload: null,
    parameters: [],
    combine: "grid",
    samples: "20",
    seed: "1",
    adaptive: emptyAdaptive(),
    derived: [],
    solver: null,
    backend: null,
    processes: 1,
    nodes: 1,
    memoryGb: 1,
    warmStart: false,
    objectives: [],
    convergence: emptyConvergence(),
  };
}

export function paramRow(name: string, def?: TemplateParameter, spec?: ParameterSpec): ParamRow {
  const row: ParamRow = {
    key: newKey(),
    name,
    mode: "fixed",
    value: def?.default !== undefined ? String(def.default) : "",
    values: "",
    start: def?.min !== undefined ? String(def.min) : "",
    stop: def?.max !== undefined ? String(def.max) : "",
    step: "",
    count: "5",
    min: def?.min !== undefined ? String(def.min) : "",
    max: def?.max !== undefined ? String(def.max) : "",
    integer: def?.type === "int",
    def,
  };
  if (!def) row.mode = "values";
  if (spec === undefined) return row;
  if (Array.isArray(spec)) return { ...row, mode: "values", values: spec.join(", ") };
  if (typeof spec !== "object" || spec === null)
    return { ...row, mode: "fixed", value: String(spec) };
  if ("values" in spec) return { ...row, mode: "values", values: spec.values.join(", ") };
  if ("value" in spec) return { ...row, mode: "fixed", value: String(spec.value) };
  if ("range" in spec) {
    const [a, b, c] = spec.range;
    return { ...row, mode: "range", start: String(a), stop: String(b), step: String(c) };
  }
  if ("linspace" in spec) {
    const [a, b, c] = spec.linspace;
    return { ...row, mode: "linspace", start: String(a), stop: String(b), count: String(c) };
  }
  if ("min" in spec)
    return {
      ...row,
      mode: "sampled",
      min: String(spec.min),
      max: String(spec.max),
      integer: !!spec.integer,
    };
  return row;
}

function convergenceForm(c: ConvergencePolicy | undefined): ConvergenceForm {
  const f = emptyConvergence();
  if (!c) return f;
  const d = c.diverge ?? {};
  f.nan = d.nan ?? true;
  if (d.residual_above !== undefined) {
    f.residualAboveOn = true;
    f.residualAbove = String(d.residual_above);
  }
  if (d.courant_above !== undefined) {
    f.courantAboveOn = true;
    f.courantAbove = String(d.courant_above);
  }
  if (c.converge?.residuals_below !== undefined) {
    f.residualsBelowOn = true;
    f.residualsBelow = String(c.converge.residuals_below);
  }
  const steady = c.converge?.objective;
  if (steady) {
    f.objectiveOn = true;
    f.objectiveSeries = steady.series;
    // left out of a spec written by hand: the form keeps the portal's defaults (50, 1e-4)
    if (steady.window !== undefined) f.window = String(steady.window);
    if (steady.tolerance !== undefined) f.tolerance = String(steady.tolerance);
  }
  if (c.min_iterations !== undefined) f.minIterations = String(c.min_iterations);
  if (c.max_wall_seconds) {
    f.maxWallOn = true;
    f.maxWallMinutes = String(Math.round((c.max_wall_seconds / 60) * 100) / 100);
  }
  return f;
}

/**
 * The template's parameters, those that vary first (the stored template keeps no key order):
 * `first` names, then the demo's, then the rest by name.
 */
function orderedParameters(t: CaseTemplate, first: string[] = []) {
  const lead = [...first, ...Object.keys(t.demo?.parameters ?? {})];
  const rank = (name: string) => (lead.includes(name) ? lead.indexOf(name) : lead.length);
  return Object.entries(t.parameters).sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
}

/** A fresh form for a template, starting from its demo sweep. */
export function formFromTemplate(t: CaseTemplate, keep?: Partial<WizardForm>): WizardForm {
  const demo = t.demo?.parameters ?? {};
  return {
    ...emptyForm(),
    ...keep,
    source: "template",
    template: t.name,
    upload: null,
    parameters: orderedParameters(t).map(([name, def]) => paramRow(name, def, demo[name])),
    combine: t.demo?.combine ?? "grid",
    derived: [],
    solver: t.solver,
    processes: t.resources.processes ?? 1,
    nodes: t.resources.nodes ?? 1,
    memoryGb: t.resources.memory_gb ?? 1,
    objectives: objectiveRows(t.objectives ?? {}),
  };
}

/** Parameters an uploaded case uses in its {{ placeholders }}. */
export function placeholderNames(upload: Upload): string[] {
  const used = new Set<string>();
  const map = (upload.placeholders ?? {}) as Record<string, string[]>;
  for (const names of Object.values(map)) for (const n of names ?? []) used.add(n);
  return [...used].sort();
}

/** A fresh form for an uploaded case: a parameter per placeholder, the solver its
 * controlDict names. */
export function formFromUpload(upload: Upload, keep?: Partial<WizardForm>): WizardForm {
  return {
    ...emptyForm(),
    ...keep,
    source: "upload",
    template: null,
    upload,
    parameters: placeholderNames(upload).map((n) => paramRow(n)),
    solver: upload.inspection?.solver ?? null,
    objectives: [],
  };
}

/** The form of a saved spec (editing a draft). */
export function formFromSpec(
  spec: StudySpec,
  template?: CaseTemplate,
  upload?: Upload | null,
): WizardForm {
  const base = template ? formFromTemplate(template) : emptyForm();
  const given = spec.parameters ?? {};
  const rows: ParamRow[] = template
    ? orderedParameters(template, Object.keys(given)).map(([name, def]) =>
        paramRow(name, def, given[name]),
      )
    : Object.entries(given).map(([name, p]) => paramRow(name, undefined, p));
  return {
    ...base,
    name: spec.name ?? "",
    description: spec.description ?? "",
    source: spec.case ? "upload" : "template",
    template: spec.template ?? null,
    upload: upload ?? null,
    parameters: rows,
    combine: spec.combine ?? "grid",
    samples: spec.samples !== undefined ? String(spec.samples) : base.samples,
    seed: spec.seed !== undefined ? String(spec.seed) : base.seed,
    adaptive: adaptiveForm(spec.adaptive),
    derived: Object.entries(spec.derived ?? {}).map(([name, expr]) => ({
      key: newKey(),
      name,
      expr,
    })),
    solver: spec.solver ?? base.solver,
    backend: spec.backend ?? null,
    processes: spec.resources?.processes ?? base.processes,
    nodes: spec.resources?.nodes ?? base.nodes,
    memoryGb: spec.resources?.memory_gb ?? base.memoryGb,
    warmStart: spec.warm_start === true,
    objectives: spec.objectives ? objectiveRows(spec.objectives) : base.objectives,
    convergence: convergenceForm(spec.convergence),
  };
}
