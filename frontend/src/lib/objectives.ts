/**
 * A study's objectives as a form edits them (one row each, whatever its kind) and back into
 * the spec's `objectives`, with what is wrong keyed like the server's errors. The new-study
 * wizard and the dialog that edits a study's objectives after its runs share both.
 */
import { isIdentifier } from "./spec";
import type { ObjectiveSpec } from "./types";
import { parseNumber } from "./values";

/** An objective that reduces a recorded series (the other kind is an expression). */
type SeriesObjective = Extract<ObjectiveSpec, { series: string }>;
export type Reduce = NonNullable<SeriesObjective["reduce"]>;

export interface ObjectiveRow {
  key: string;
  name: string;
  kind: "series" | "expr";
  series: string;
  reduce: Reduce;
  n: string;
  expr: string;
}

let counter = 0;

/** A blank row, as "Add objective" makes it. */
export function newObjectiveRow(): ObjectiveRow {
  return {
    key: `objective-${++counter}`,
    name: "",
    kind: "series",
    series: "",
    reduce: "mean_last",
    n: "20",
    expr: "",
  };
}

/** The rows of a spec's objectives, in its order. */
export function objectiveRows(objectives: Record<string, ObjectiveSpec>): ObjectiveRow[] {
  return Object.entries(objectives).map(([name, o]) => ({
    ...newObjectiveRow(),
    name,
    kind: "expr" in o ? "expr" : "series",
    series: "series" in o ? o.series : "",
    reduce: ("reduce" in o ? o.reduce : undefined) ?? "last",
    n: "n" in o && o.n !== undefined ? String(o.n) : "20",
    expr: "expr" in o ? o.expr : "",
  }));
}

/** The spec's `objectives` from the rows, plus what is wrong with them. */
export function objectivesSpec(rows: ObjectiveRow[]): {
  objectives: Record<string, ObjectiveSpec>;
  errors: Record<string, string>;
} {
  const objectives: Record<string, ObjectiveSpec> = {};
  const errors: Record<string, string> = {};
  for (const o of rows) {
    const where = `objectives.${o.name || o.key}`;
    if (!isIdentifier(o.name)) {
      errors[`${where}.name`] = "names are identifiers: letters, digits and _";
      continue;
    }
    if (o.kind === "expr") {
      if (!o.expr.trim()) errors[where] = "give an expression over other objectives, e.g. Cl / Cd";
      objectives[o.name] = { expr: o.expr.trim() };
    } else {
      if (!o.series.trim()) errors[where] = "give a series, e.g. forceCoeffs.Cl";
      const entry: ObjectiveSpec = { series: o.series.trim(), reduce: o.reduce };
      if (o.reduce === "mean_last") {
        const n = parseNumber(o.n);
        if (n === null || !Number.isInteger(n) || n < 1)
          errors[where] = "n: a whole number of iterations ≥ 1";
        entry.n = n ?? 20;
      }
      objectives[o.name] = entry;
    }
  }
  return { objectives, errors };
}
