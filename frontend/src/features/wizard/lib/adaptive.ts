/**
 * An adaptive study in the wizard (combine: adaptive, docs/study-spec.md "Adaptive sampling"):
 * its fields, the spec's `adaptive` block they make with what is wrong with them (keyed like
 * the server's errors), and the parameter rows turned into bounds when the user picks it.
 */
import { formatInt, plural } from "@/lib/format";
import type { PreviewAdaptive, StudySpec } from "@/lib/types";
import { parseNumber, parseValueList } from "@/lib/values";
import type { ParamRow } from "./form";

export type AdaptiveSpec = NonNullable<StudySpec["adaptive"]>;
export type AdaptiveGoal = NonNullable<AdaptiveSpec["goal"]>;
export type AdaptiveDirection = NonNullable<AdaptiveSpec["direction"]>;
/** Which way an objective is better. */
export type Sense = "max" | "min";

/** A range an objective must keep (`Cl ≥ 0.5`), its bounds as typed (blank: none). */
export interface ConstraintRow {
  key: string;
  objective: string;
  min: string;
  max: string;
}

export interface AdaptiveForm {
  goal: AdaptiveGoal;
  /**
   * map: the objectives learnt (none chosen: all of the study's); optimise: the one;
   * pareto: the two or three traded off
   */
  objectives: string[];
  /** optimise: its way; pareto: the way of an objective not in `directions` */
  direction: Sense;
  /** pareto: each objective's own way (a saved spec's per-objective direction) */
  directions: Record<string, Sense>;
  /** optimise and pareto: the ranges the runs must keep */
  constraints: ConstraintRow[];
  budget: string;
  batch: string;
  /** blank: the portal's default initial design */
  initial: string;
  /** blank: no early stop */
  tolerance: string;
}

/** The spec's limits (backend/studies/schemas/study-spec.json, AdaptiveSpec). */
const MAX_BUDGET = 100_000;
const MAX_BATCH = 1000;
const MAX_INITIAL = 10_000;
const MAX_TOLERANCE = 100;
export const DEFAULT_BATCH = 4;
const MIN_PARETO = 2;
const MAX_PARETO = 3;

let counter = 0;
/** A new, empty constraint row. */
export const newConstraint = (objective = ""): ConstraintRow => ({
  key: `c${++counter}`,
  objective,
  min: "",
  max: "",
});

/** Whether a goal keeps constraints and a direction (map learns, it does not aim). */
export const aims = (goal: AdaptiveGoal) => goal === "optimise" || goal === "pareto";

export const emptyAdaptive = (): AdaptiveForm => ({
  goal: "map",
  objectives: [],
  direction: "max",
  directions: {},
  constraints: [],
  budget: "20",
  batch: String(DEFAULT_BATCH),
  initial: "",
  tolerance: "",
});

/** The form's fields of a saved spec's `adaptive` block. */
export function adaptiveForm(spec: AdaptiveSpec | undefined): AdaptiveForm {
  const f = emptyAdaptive();
  if (!spec) return f;
  const objectives = [...(spec.objectives ?? [])];
  const d = spec.direction ?? "max";
  const directions = typeof d === "string" ? {} : { ...d };
  return {
    goal: spec.goal ?? "map",
    objectives,
    // a per-objective direction: the first chosen objective's is the optimised one's
    direction: typeof d === "string" ? d : (directions[objectives[0] ?? ""] ?? "max"),
    directions,
    constraints: Object.entries(spec.constraints ?? {}).map(([objective, c]) => ({
      ...newConstraint(objective),
      min: c.min !== undefined ? String(c.min) : "",
      max: c.max !== undefined ? String(c.max) : "",
    })),
    budget: String(spec.budget),
    batch: String(spec.batch ?? DEFAULT_BATCH),
    initial: spec.initial !== undefined ? String(spec.initial) : "",
    tolerance: spec.tolerance !== undefined ? String(spec.tolerance) : "",
  };
}

/** The initial design's size when the spec gives none (studies/adaptive.py default_initial):
 * 2 runs per varied parameter and one more, at least 4, at most the budget. */
export function defaultInitial(varied: number, budget: number | null): number {
  const n = Math.max(4, 2 * varied + 1);
  return budget !== null && budget >= 1 ? Math.min(n, budget) : n;
}

function wholeIn(text: string, low: number, high: number): number | null {
  const n = parseNumber(text);
  return n !== null && Number.isInteger(n) && n >= low && n <= high ? n : null;
}

/**
 * The spec's `adaptive` block, plus what is wrong with it. `objectives` are the study's
 * objective names (the Objectives step), `varied` how many parameters have bounds.
 */
export function adaptiveSpec(
  f: AdaptiveForm,
  objectives: string[],
  varied: number,
): { adaptive: AdaptiveSpec; errors: Record<string, string> } {
  const errors: Record<string, string> = {};
  const budget = wholeIn(f.budget, 1, MAX_BUDGET);
  if (budget === null)
    errors["adaptive.budget"] = `the most runs in all: a whole number from 1 to ${MAX_BUDGET}`;
  // "auto": each batch as large as what the tenant can run at once when it is made
  const batch = f.batch.trim().toLowerCase() === "auto" ? "auto" : wholeIn(f.batch, 1, MAX_BATCH);
  if (batch === null)
    errors["adaptive.batch"] =
      `runs per batch: a whole number from 1 to ${MAX_BATCH}, or auto (as many as can run at once)`;
  const adaptive: AdaptiveSpec = { goal: f.goal, budget: budget ?? 0, batch: batch ?? 0 };

  if (f.initial.trim()) {
    const initial = wholeIn(f.initial, 2, MAX_INITIAL);
    if (initial === null)
      errors["adaptive.initial"] = `a whole number of runs from 2 to ${MAX_INITIAL}, or blank`;
    else {
      adaptive.initial = initial;
      if (budget !== null && budget < initial)
        errors["adaptive.budget"] =
          `below the initial design (${initial} runs): raise the budget or shrink the initial design`;
    }
  } else if (budget !== null && budget < 2) {
    errors["adaptive.budget"] =
      `leaves no room for a surrogate: give at least 2 runs (the default initial design here is ${defaultInitial(varied, null)})`;
  }

  if (f.tolerance.trim()) {
    const t = parseNumber(f.tolerance);
    if (t === null || t <= 0 || t > MAX_TOLERANCE)
      errors["adaptive.tolerance"] =
        `a number above 0 and at most ${MAX_TOLERANCE} (e.g. 0.05), or blank`;
    else adaptive.tolerance = t;
  }

  const chosen = f.objectives.filter((o) => o);
  if (!objectives.length) {
    errors["adaptive.objectives"] =
      "adaptive sampling learns the study's objectives, and it has none: add one in the Objectives step";
  } else {
    const unknown = chosen.find((o) => !objectives.includes(o));
    if (unknown !== undefined)
      errors["adaptive.objectives"] =
        `the study has no objective ${unknown}; it has ${objectives.join(", ")}`;
    else if (f.goal === "optimise" && chosen.length !== 1)
      errors["adaptive.objectives"] =
        `pick the one objective to ${f.direction === "min" ? "minimise" : "maximise"}`;
    else if (f.goal === "pareto" && new Set(chosen).size !== chosen.length)
      errors["adaptive.objectives"] = "pick each objective once";
    else if (f.goal === "pareto" && (chosen.length < MIN_PARETO || chosen.length > MAX_PARETO))
      errors["adaptive.objectives"] =
        `a Pareto front trades off ${MIN_PARETO} or ${MAX_PARETO} objectives: ${chosen.length ? `you picked ${chosen.length}` : "pick them"}`;
  }
  if (chosen.length) adaptive.objectives = chosen;
  if (f.goal === "optimise") adaptive.direction = f.direction;
  if (f.goal === "pareto") adaptive.direction = paretoDirection(f, chosen);
  if (aims(f.goal) && f.constraints.length) {
    const constraints = constraintsOf(f.constraints, objectives, errors);
    if (Object.keys(constraints).length) adaptive.constraints = constraints;
  }
  return { adaptive, errors };
}

/** How a Pareto front's objectives are better: the one word while none has its own way
 * (as a saved spec with one word gives it), else every chosen objective's. */
export function directionOf(f: AdaptiveForm, objective: string): Sense {
  return f.directions[objective] ?? f.direction;
}

function paretoDirection(f: AdaptiveForm, chosen: string[]): AdaptiveDirection {
  if (!chosen.some((o) => o in f.directions)) return f.direction;
  return Object.fromEntries(chosen.map((o) => [o, directionOf(f, o)]));
}

/** The spec's `constraints`, each row's problem keyed `adaptive.constraints.<objective>` (an
 * unnamed row by its key). */
function constraintsOf(
  rows: ConstraintRow[],
  objectives: string[],
  errors: Record<string, string>,
): NonNullable<AdaptiveSpec["constraints"]> {
  const out: NonNullable<AdaptiveSpec["constraints"]> = {};
  const seen = new Set<string>();
  for (const row of rows) {
    const name = row.objective.trim();
    const field = `adaptive.constraints.${name || row.key}`;
    const fail = (message: string) => {
      errors[field] ??= message;
    };
    if (!name) {
      fail("pick the objective this range is for, or remove the row");
      continue;
    }
    if (!objectives.includes(name)) {
      fail(
        objectives.length
          ? `the study has no objective ${name}; it has ${objectives.join(", ")}`
          : `the study has no objective ${name}: add it in the Objectives step`,
      );
      continue;
    }
    if (seen.has(name)) {
      fail(`${name} is constrained twice: give its min and max on one row`);
      continue;
    }
    seen.add(name);
    const bound = (text: string, which: string) => {
      if (!text.trim()) return undefined;
      const n = parseNumber(text);
      if (n === null) fail(`the ${which} of ${name} must be a number (e.g. 0.5), or blank`);
      return n ?? undefined;
    };
    const min = bound(row.min, "min");
    const max = bound(row.max, "max");
    if (errors[field]) continue;
    if (min === undefined && max === undefined) {
      fail(`give ${name} a min, a max or both (e.g. min 0.5)`);
      continue;
    }
    if (min !== undefined && max !== undefined && min > max) {
      fail(`the min of ${name} (${min}) is above its max (${max})`);
      continue;
    }
    out[name] = {
      ...(min !== undefined ? { min } : {}),
      ...(max !== undefined ? { max } : {}),
    };
  }
  return out;
}

/**
 * The parameter rows when the user picks adaptive sampling, which samples between bounds or
 * holds one value: a numeric list, range or linspace becomes bounds spanning its values (a
 * template's whole-number parameter stays whole); the rest is left for the user to fix.
 */
export function rowsForAdaptive(rows: ParamRow[]): ParamRow[] {
  return rows.map((row) => {
    const values = spanned(row);
    if (values === null) return row;
    const lo = Math.min(...values);
    const hi = Math.max(...values);
    if (!(lo < hi)) return row;
    return {
      ...row,
      mode: "sampled",
      min: String(lo),
      max: String(hi),
      integer: row.def?.type === "int" || (row.def === undefined && values.every(Number.isInteger)),
    };
  });
}

function spanned(row: ParamRow): number[] | null {
  if (row.def?.type === "str") return null;
  const nums = (xs: (number | null)[]) => (xs.every((x) => x !== null) ? (xs as number[]) : null);
  switch (row.mode) {
    case "values": {
      const values = parseValueList(row.values);
      return values.length && values.every((v) => typeof v === "number")
        ? (values as number[])
        : null;
    }
    case "range":
    case "linspace":
      return nums([parseNumber(row.start), parseNumber(row.stop)]);
    default:
      return null;
  }
}

/** "Then batches of 2 up to 12 runs in all (≤ 5 batches), mapping Cl and Cd." */
export function adaptiveOutline(a: PreviewAdaptive): string {
  const aim =
    a.goal === "optimise"
      ? `${a.direction === "min" ? "minimising" : "maximising"} ${a.objectives[0] ?? ""}`
      : a.goal === "pareto"
        ? `finding the trade-offs between ${a.objectives.slice(0, -1).join(", ")} and ${a.objectives.at(-1) ?? ""}`
        : `mapping ${a.objectives.join(", ")}`;
  const more = a.budget - a.initial;
  const then =
    more > 0
      ? a.batch_auto || a.max_batches === null
        ? `Then batches as large as can run at once (${formatInt(a.batch)} now) up to ${formatInt(a.budget)} runs in all`
        : `Then batches of ${formatInt(a.batch)} up to ${formatInt(a.budget)} runs in all (≤ ${plural(a.max_batches, "batch", "batches")})`
      : `The budget (${formatInt(a.budget)} runs) is spent by the initial design`;
  const stop = a.tolerance !== null ? `, or until the score falls below ${a.tolerance}` : "";
  const kept = a.constraints.map((c) =>
    c.min !== null && c.max !== null
      ? `${c.objective} between ${c.min} and ${c.max}`
      : c.min !== null
        ? `${c.objective} ≥ ${c.min}`
        : `${c.objective} ≤ ${c.max ?? ""}`,
  );
  const keeping = kept.length
    ? `, keeping ${kept.slice(0, -1).join(", ")}${kept.length > 1 ? " and " : ""}${kept.at(-1)}`
    : "";
  return `${then}, ${aim}${keeping}${stop}.`;
}
