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

export interface AdaptiveForm {
  goal: AdaptiveGoal;
  /** map: the objectives learnt (none chosen: all of the study's); optimise: the one */
  objectives: string[];
  direction: AdaptiveDirection;
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

export const emptyAdaptive = (): AdaptiveForm => ({
  goal: "map",
  objectives: [],
  direction: "max",
  budget: "20",
  batch: String(DEFAULT_BATCH),
  initial: "",
  tolerance: "",
});

/** The form's fields of a saved spec's `adaptive` block. */
export function adaptiveForm(spec: AdaptiveSpec | undefined): AdaptiveForm {
  const f = emptyAdaptive();
  if (!spec) return f;
  return {
    goal: spec.goal ?? "map",
    objectives: [...(spec.objectives ?? [])],
    direction: spec.direction ?? "max",
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
  const batch = wholeIn(f.batch, 1, MAX_BATCH);
  if (batch === null)
    errors["adaptive.batch"] = `runs per batch: a whole number from 1 to ${MAX_BATCH}`;
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
  }
  if (chosen.length) adaptive.objectives = chosen;
  if (f.goal === "optimise") adaptive.direction = f.direction;
  return { adaptive, errors };
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
      : `mapping ${a.objectives.join(", ")}`;
  const more = a.budget - a.initial;
  const then =
    more > 0
      ? `Then batches of ${formatInt(a.batch)} up to ${formatInt(a.budget)} runs in all (≤ ${plural(a.max_batches, "batch", "batches")})`
      : `The budget (${formatInt(a.budget)} runs) is spent by the initial design`;
  const stop = a.tolerance !== null ? `, or until the score falls below ${a.tolerance}` : "";
  return `${then}, ${aim}${stop}.`;
}
