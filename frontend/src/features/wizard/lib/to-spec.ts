/**
 * The new-study form translated into the study spec (docs/study-spec.md), with what is
 * already wrong with it keyed like the server's errors, and where each error is shown.
 */
import { objectivesSpec } from "@/lib/objectives";
import { isIdentifier } from "@/lib/spec";
import type {
  ConvergencePolicy,
  ParameterSpec,
  Scalar,
  StudySpec,
  TemplateParameter,
} from "@/lib/types";
import { parseNumber, parseValueList } from "@/lib/values";
import { adaptiveSpec } from "./adaptive";
import type { Combine, ConvergenceForm, ParamRow, WizardForm } from "./form";

/** The ways of combining that sample between each parameter's bounds. */
export function isSampled(c: Combine) {
  return c === "lhs" || c === "random" || c === "adaptive";
}

/**
 * Whether a solver is steady (simpleFoam and its kin: the name holds "simple"), the solvers
 * whose runs may start warm (the API refuses `warm_start` for the others).
 */
export function isSteadySolver(solver: string | null | undefined): boolean {
  return !!solver && solver.toLowerCase().includes("simple");
}

function typed(text: string, def?: TemplateParameter): Scalar {
  if (def?.type === "str") return text;
  const n = parseNumber(text);
  return n === null ? text : n;
}

/** How many values one row gives (for the count column), or null when it cannot tell. */
export function rowCount(row: ParamRow): number | null {
  switch (row.mode) {
    case "fixed":
      return 1;
    case "values":
      return parseValueList(row.values).length;
    case "range": {
      const a = parseNumber(row.start);
      const b = parseNumber(row.stop);
      const s = parseNumber(row.step);
      if (a === null || b === null || s === null || s === 0 || (b - a) * s < 0) return null;
      return Math.floor((b - a) / s + 1e-9) + 1;
    }
    case "linspace": {
      const n = parseNumber(row.count);
      return n !== null && Number.isInteger(n) && n >= 1 ? n : null;
    }
    case "sampled":
      return null;
  }
}

export interface SpecResult {
  spec: StudySpec;
  /** problems found in the browser, keyed like the server's `field` (parameters.aoa, …) */
  errors: Record<string, string>;
}

function paramSpec(
  row: ParamRow,
  errors: Record<string, string>,
  combine: Combine,
): ParameterSpec | undefined {
  const where = `parameters.${row.name}`;
  const num = (text: string, label: string): number | null => {
    const n = parseNumber(text);
    if (n === null) errors[where] ??= `${label} must be a number`;
    return n;
  };
  if (combine === "adaptive" && row.mode !== "fixed" && row.mode !== "sampled")
    errors[where] =
      "adaptive sampling takes bounds or one value: choose Sampled (min and max) or Fixed";
  switch (row.mode) {
    case "fixed": {
      if (row.value.trim() === "") {
        errors[where] = "give a value";
        return undefined;
      }
      const value = typed(row.value.trim(), row.def);
      if (row.def && row.def.default !== undefined && String(row.def.default) === String(value)) {
        return undefined; // the template's default applies
      }
      if (row.def && row.def.type !== "str" && typeof value !== "number") {
        errors[where] = "must be a number";
      }
      return { value };
    }
    case "values": {
      const values = parseValueList(row.values).map((v) =>
        row.def?.type === "str" ? String(v) : v,
      );
      if (!values.length) errors[where] = "give at least one value (comma-separated)";
      else if (row.def && row.def.type !== "str" && values.some((v) => typeof v !== "number")) {
        errors[where] = "values must be numbers";
      }
      return { values };
    }
    case "range": {
      const a = num(row.start, "start");
      const b = num(row.stop, "stop");
      const s = num(row.step, "step");
      if (a !== null && b !== null && s !== null) {
        if (s === 0) errors[where] = "step must not be 0";
        else if ((b - a) * s < 0) errors[where] = `step ${s} never reaches ${b} from ${a}`;
      }
      return { range: [a ?? 0, b ?? 0, s ?? 0] };
    }
    case "linspace": {
      const a = num(row.start, "start");
      const b = num(row.stop, "stop");
      const n = parseNumber(row.count);
      if (n === null || !Number.isInteger(n) || n < 1)
        errors[where] ??= "count must be a whole number ≥ 1";
      return { linspace: [a ?? 0, b ?? 0, n ?? 0] };
    }
    case "sampled": {
      if (!isSampled(combine))
        errors[where] =
          "min/max sampling needs a sampled study (Latin hypercube, random or adaptive)";
      if (row.def?.type === "str") errors[where] = "a text parameter takes values, not bounds";
      const lo = num(row.min, "min");
      const hi = num(row.max, "max");
      if (lo !== null && hi !== null && lo > hi) errors[where] = `min ${lo} is above max ${hi}`;
      else if (combine === "adaptive" && lo !== null && lo === hi)
        errors[where] = `min and max are both ${lo}: give bounds with a range, or choose Fixed`;
      return { min: lo ?? 0, max: hi ?? 0, ...(row.integer ? { integer: true } : {}) };
    }
  }
}

/**
 * The `convergence` key, or undefined when the form says what the portal does anyway
 * (stop NaN runs, nothing else): then the spec leaves it out.
 */
function convergenceSpec(
  c: ConvergenceForm,
  errors: Record<string, string>,
): ConvergencePolicy | undefined {
  const num = (text: string, field: string) => {
    const n = parseNumber(text);
    if (n === null || n <= 0) errors[field] = "must be a number above 0";
    return n ?? 0;
  };
  const whole = (text: string, field: string, low: number) => {
    const n = parseNumber(text);
    if (n === null || !Number.isInteger(n) || n < low) errors[field] = `a whole number ≥ ${low}`;
    return n ?? low;
  };
  const out: ConvergencePolicy = {};
  if (!c.nan || c.residualAboveOn || c.courantAboveOn) {
    out.diverge = { nan: c.nan };
    if (c.residualAboveOn)
      out.diverge.residual_above = num(c.residualAbove, "convergence.diverge.residual_above");
    if (c.courantAboveOn)
      out.diverge.courant_above = num(c.courantAbove, "convergence.diverge.courant_above");
  }
  if (c.residualsBelowOn || c.objectiveOn) {
    out.converge = {};
    if (c.residualsBelowOn)
      out.converge.residuals_below = num(c.residualsBelow, "convergence.converge.residuals_below");
    if (c.objectiveOn) {
      if (!c.objectiveSeries.trim())
        errors["convergence.converge.objective.series"] = "pick a series, e.g. forceCoeffs.Cl";
      out.converge.objective = {
        series: c.objectiveSeries.trim(),
        window: whole(c.window, "convergence.converge.objective.window", 2),
        tolerance: num(c.tolerance, "convergence.converge.objective.tolerance"),
      };
    }
  }
  if (c.minIterations.trim())
    out.min_iterations = whole(c.minIterations, "convergence.min_iterations", 0);
  if (c.maxWallOn)
    out.max_wall_seconds = Math.round(num(c.maxWallMinutes, "convergence.max_wall_seconds") * 60);
  return Object.keys(out).length ? out : undefined;
}

/** The spec the API receives, plus what is already wrong with it. */
export function toSpec(form: WizardForm): SpecResult {
  const errors: Record<string, string> = {};
  const spec: StudySpec = { name: form.name.trim() };
  if (!spec.name) errors.name = "give the study a name";
  else if (spec.name.length > 200) errors.name = "at most 200 characters";
  if (form.description.trim()) spec.description = form.description.trim();
  if (form.source === "template") {
    if (form.template) spec.template = form.template;
    else errors.template = "pick a template, or upload a case";
  } else {
    if (form.upload) spec.case = form.upload.id;
    else errors.case = "upload a case archive (.tar.gz, .tgz or .zip)";
  }
  if (form.solver) spec.solver = form.solver;
  else if (form.source === "upload" && form.upload)
    // only an uploaded case can name none: before one is in, the case is what is missing
    errors.solver = "choose the solver this case runs (its controlDict names none)";
  if (form.backend) spec.backend = form.backend;
  spec.resources = { processes: form.processes, nodes: form.nodes, memory_gb: form.memoryGb };
  if (!Number.isInteger(form.processes) || form.processes < 1)
    errors["resources.processes"] = "at least 1 process";
  if (!Number.isInteger(form.nodes) || form.nodes < 1)
    errors["resources.nodes"] = "at least 1 node";
  else if (form.nodes > form.processes) errors["resources.nodes"] = "cannot exceed the processes";
  if (!(form.memoryGb > 0)) errors["resources.memory_gb"] = "must be above 0 GB";
  // the switch is shown for steady solvers only: left on from one, it says nothing of another
  if (form.warmStart && isSteadySolver(form.solver)) spec.warm_start = true;

  const parameters: Record<string, ParameterSpec> = {};
  const seen = new Set<string>();
  for (const row of form.parameters) {
    const where = `parameters.${row.name}`;
    if (!isIdentifier(row.name)) {
      errors[`parameters.${row.name || row.key}`] = "names are identifiers: letters, digits and _";
      continue;
    }
    if (seen.has(row.name)) errors[where] = "this name is used twice";
    seen.add(row.name);
    const p = paramSpec(row, errors, form.combine);
    if (p !== undefined) parameters[row.name] = p;
  }
  spec.parameters = parameters;
  spec.combine = form.combine;
  if (form.combine === "lhs" || form.combine === "random") {
    const samples = parseNumber(form.samples);
    if (samples === null || !Number.isInteger(samples) || samples < 1)
      errors.samples = "a whole number of samples ≥ 1";
    else spec.samples = samples;
  }
  if (isSampled(form.combine)) {
    const seed = parseNumber(form.seed);
    if (seed !== null && Number.isInteger(seed)) spec.seed = seed;
  }
  if (form.combine === "zip") {
    const counts = form.parameters.filter((r) => r.mode !== "fixed").map(rowCount);
    if (new Set(counts).size > 1)
      errors.parameters =
        "zip pairs values by position: give every varied parameter the same number of values";
  }

  const derived: Record<string, string> = {};
  for (const d of form.derived) {
    if (!d.name && !d.expr) continue;
    if (!isIdentifier(d.name))
      errors[`derived.${d.name || d.key}`] = "names are identifiers: letters, digits and _";
    else if (!d.expr.trim())
      errors[`derived.${d.name}`] = "give an expression, e.g. speed*cos(radians(aoa))";
    else if (seen.has(d.name)) errors[`derived.${d.name}`] = "a parameter already has this name";
    derived[d.name] = d.expr.trim();
  }
  if (Object.keys(derived).length) spec.derived = derived;

  const objectives = objectivesSpec(form.objectives);
  Object.assign(errors, objectives.errors);
  spec.objectives = objectives.objectives;

  if (form.combine === "adaptive") {
    const varied = form.parameters.filter((r) => r.mode === "sampled").length;
    if (varied === 0)
      errors.parameters =
        "adaptive sampling needs at least one parameter with bounds: set one to Sampled (min and max)";
    const adaptive = adaptiveSpec(form.adaptive, Object.keys(spec.objectives), varied);
    spec.adaptive = adaptive.adaptive;
    Object.assign(errors, adaptive.errors);
  }

  const convergence = convergenceSpec(form.convergence, errors);
  if (convergence) spec.convergence = convergence;
  return { spec, errors };
}

/** Which wizard step holds a field (server errors jump there). */
export function stepOfField(field: string | null | undefined): number {
  if (!field) return 4;
  const head = field.split(/[.[]/)[0] ?? "";
  if (["name", "description", "template", "case", "file"].includes(head)) return 0;
  if (["parameters", "combine", "samples", "seed", "adaptive", "derived"].includes(head)) return 1;
  if (["solver", "backend", "resources", "prepare", "warm_start"].includes(head)) return 2;
  if (["objectives", "convergence"].includes(head)) return 3;
  return 4;
}
