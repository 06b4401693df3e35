/**
 * What an edit of a study's objectives and trust rules changes, before → after, and the
 * objectives to send: an objective the user did not change goes back exactly as the spec had
 * it (its defaults left out as they were), so a save changes only what the user changed.
 */
import type { ObjectiveSpec, TrustRules } from "@/lib/types";

export interface Change {
  kind: "added" | "removed" | "changed";
  /** `objective Cm` or `trust rule residuals_below` */
  what: string;
  before?: string;
  after?: string;
}

/** An objective in words, its defaults filled in: two specs that mean the same read the same. */
export function describeObjective(o: ObjectiveSpec): string {
  if ("expr" in o) return o.expr.trim();
  const reduce = o.reduce ?? "last";
  const n = reduce === "mean_last" ? ` of the last ${o.n ?? 20}` : "";
  return `${reduce}${n} of ${o.series.trim()}`;
}

/** The objectives to save: `after`, but each one that means what it meant in `before` as
 * `before` wrote it. */
export function objectivesToSave(
  before: Record<string, ObjectiveSpec>,
  after: Record<string, ObjectiveSpec>,
): Record<string, ObjectiveSpec> {
  const out: Record<string, ObjectiveSpec> = {};
  for (const [name, spec] of Object.entries(after)) {
    const old = before[name];
    out[name] = old && describeObjective(old) === describeObjective(spec) ? old : spec;
  }
  return out;
}

export function objectivesDiff(
  before: Record<string, ObjectiveSpec>,
  after: Record<string, ObjectiveSpec>,
): Change[] {
  const changes: Change[] = [];
  for (const [name, spec] of Object.entries(after)) {
    const old = before[name];
    if (!old)
      changes.push({ kind: "added", what: `objective ${name}`, after: describeObjective(spec) });
    else if (describeObjective(old) !== describeObjective(spec))
      changes.push({
        kind: "changed",
        what: `objective ${name}`,
        before: describeObjective(old),
        after: describeObjective(spec),
      });
  }
  for (const [name, spec] of Object.entries(before))
    if (!(name in after))
      changes.push({ kind: "removed", what: `objective ${name}`, before: describeObjective(spec) });
  return changes;
}

type Rules = Record<string, number | undefined>;

/** Trust rules in the order the dialog edits them, with the value each has when not set. */
export const TRUST_RULES = [
  { key: "residuals_below", label: "residuals below", fallback: 0.001 },
  { key: "drift_below", label: "objectives drift below", fallback: 0.001 },
  { key: "oscillation_below", label: "oscillation below", fallback: 0.02 },
] as const;

export function trustDiff(before: TrustRules, after: TrustRules): Change[] {
  const b = before as Rules;
  const a = after as Rules;
  const changes: Change[] = [];
  for (const key of [...new Set([...Object.keys(b), ...Object.keys(a)])]) {
    const what = `trust rule ${key}`;
    if (b[key] === a[key]) continue;
    if (b[key] === undefined) changes.push({ kind: "added", what, after: String(a[key]) });
    else if (a[key] === undefined) changes.push({ kind: "removed", what, before: String(b[key]) });
    else changes.push({ kind: "changed", what, before: String(b[key]), after: String(a[key]) });
  }
  return changes;
}

/**
 * The trust rules after the edit: the spec's, with each rule the user typed set (a number)
 * or, emptied, left out; rules the dialog does not edit stay as they were.
 */
export function trustAfter(before: TrustRules, typed: Record<string, string>): TrustRules {
  const out: Rules = { ...(before as Rules) };
  for (const [key, text] of Object.entries(typed)) {
    const trimmed = text.trim();
    if (trimmed === "") delete out[key];
    else out[key] = Number(trimmed);
  }
  return out as TrustRules;
}
