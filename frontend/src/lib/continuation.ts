/**
 * A run going on from one of its writes, as a form edits it: the iterations to add, the write
 * to start from and the settings a restart changes; what is wrong before sending; the API's
 * request; the API's refusal placed on the field it names; and the words for what a run went
 * on from. The run page's "Continue…" and the study page's "Continue selected…" share it.
 */
import { ApiError, errorMessage } from "./api-client";
import { formatInt, formatNumber, plural } from "./format";
import type { AgentResume, ContinueRequest, ResumedFrom, SkippedRun } from "./types";

/** The case files a restart may change (system/…). */
export const SETTING_FILES = ["controlDict", "fvSolution", "fvSchemes"] as const;
export type SettingFile = (typeof SETTING_FILES)[number];

/** What the API calls the run's last complete write. */
export const LATEST = "latest";
export const MAX_ITERATIONS = 10_000_000;

/** Settings engineers change most when a run goes on badly, offered as examples. */
export const SETTING_EXAMPLES: readonly { file: SettingFile; key: string; value: string }[] = [
  { file: "fvSolution", key: "relaxationFactors.equations.U", value: "0.5" },
  { file: "controlDict", key: "deltaT", value: "0.0005" },
  { file: "fvSchemes", key: "ddtSchemes.default", value: "Euler" },
];

/** One changed setting: a dotted key of a case file and its new value. */
export interface SettingRow {
  id: string;
  file: SettingFile;
  key: string;
  value: string;
}

export interface ContinueDraft {
  /** as the number input holds it: "" while empty */
  iterations: number | string;
  /** "" or "latest": the latest write; else the time of one of the run's writes */
  time: string;
  settings: SettingRow[];
}

/**
 * What is wrong, by where the form shows it: "iterations", "time", "settings" (the section),
 * `setting.<row id>.key` and `setting.<row id>.value` (a row's inputs), "form" (the rest).
 */
export type DraftErrors = Record<string, string>;

let counter = 0;

export function newSettingRow(init: Partial<Omit<SettingRow, "id">> = {}): SettingRow {
  return { id: `setting-${++counter}`, file: "fvSolution", key: "", value: "", ...init };
}

export function emptyDraft(): ContinueDraft {
  return { iterations: "", time: "", settings: [] };
}

const blank = (row: SettingRow) => !row.key.trim() && !row.value.trim();

/** The rows that say something (a row left blank is ignored). */
export function filledSettings(draft: ContinueDraft): SettingRow[] {
  return draft.settings.filter((row) => !blank(row));
}

/** The write asked for ("latest" when none is named). */
export function draftTime(draft: ContinueDraft): string {
  return draft.time.trim() || LATEST;
}

/**
 * What the form finds wrong before sending. `iterationsRequired`: whether the write chosen
 * leaves the solver nothing to do without added iterations (the latest write of a run that
 * completed); an earlier write runs on to the case's endTime.
 */
export function checkDraft(
  draft: ContinueDraft,
  { iterationsRequired }: { iterationsRequired: boolean },
): DraftErrors {
  const errors: DraftErrors = {};
  const iterations = String(draft.iterations).trim();
  if (iterations === "") {
    if (iterationsRequired)
      errors.iterations = "give the time steps to add, or restart from an earlier write";
  } else {
    const n = Number(iterations);
    if (!Number.isInteger(n) || n < 1 || n > MAX_ITERATIONS)
      errors.iterations = `a whole number from 1 to ${formatInt(MAX_ITERATIONS)}`;
  }
  const seen = new Set<string>();
  for (const row of filledSettings(draft)) {
    const key = row.key.trim();
    if (!key) errors[`setting.${row.id}.key`] = "a dotted key, e.g. relaxationFactors.equations.U";
    else if (seen.has(`${row.file} ${key}`))
      errors[`setting.${row.id}.key`] = `${row.file} ${key} is already set above`;
    seen.add(`${row.file} ${key}`);
    if (!row.value.trim()) errors[`setting.${row.id}.value`] = "a value, e.g. 0.5 or Euler";
  }
  return errors;
}

/** The settings as the API takes them: {file: {dotted key: value}}. */
export function settingsOf(draft: ContinueDraft): Record<string, Record<string, string>> {
  const settings: Record<string, Record<string, string>> = {};
  for (const row of filledSettings(draft))
    (settings[row.file] ??= {})[row.key.trim()] = row.value.trim();
  return settings;
}

/** The request: what the user gave, the API's defaults (the latest write, no change) left out. */
export function continueBody(draft: ContinueDraft): ContinueRequest {
  const body: ContinueRequest = {};
  const iterations = String(draft.iterations).trim();
  if (iterations !== "") body.iterations = Number(iterations);
  const time = draftTime(draft);
  if (time !== LATEST) body.time = time;
  const settings = settingsOf(draft);
  if (Object.keys(settings).length) body.settings = settings;
  return body;
}

/** The message without the field it starts with ("iterations: a whole number…"). */
function without(prefix: string, message: string): string {
  return message.startsWith(`${prefix}: `) ? message.slice(prefix.length + 2) : message;
}

/**
 * The API's refusal placed where the form shows it: under the input its `field` names
 * (`iterations`, `time`, `settings.fvSolution.relaxationFactors.equations.U` on that row, or
 * `settings.fvSolution` on the row its message names), else as the form's alert.
 */
export function placeError(error: unknown, draft: ContinueDraft): DraftErrors {
  if (!error) return {};
  if (!(error instanceof ApiError)) return { form: errorMessage(error) };
  const field = error.field ?? "";
  if (field === "iterations" || field === "time") return { [field]: without(field, error.message) };
  if (field.startsWith("settings.")) {
    const [, file = "", ...rest] = field.split(".");
    const key = rest.join(".");
    const rows = filledSettings(draft).filter((r) => r.file === file);
    const named = rows.find((r) =>
      key ? r.key.trim() === key : error.message.startsWith(`settings.${file}.${r.key.trim()}:`),
    );
    const row = named ?? rows[0];
    if (row) {
      const where = named ? `settings.${file}.${row.key.trim()}` : `settings.${file}`;
      return { [`setting.${row.id}.${key ? "value" : "key"}`]: without(where, error.message) };
    }
  }
  if (field === "settings" || field.startsWith("settings."))
    return { settings: without("settings", error.message) };
  return { form: error.message };
}

/** The runs a study's refusal skipped (its `details.skipped`), each with why. */
export function skippedOf(error: unknown): SkippedRun[] {
  if (!(error instanceof ApiError)) return [];
  const details = error.details;
  if (!details || typeof details !== "object" || !("skipped" in details)) return [];
  const skipped = details.skipped;
  if (!Array.isArray(skipped)) return [];
  return skipped.filter(
    (s): s is SkippedRun =>
      !!s &&
      typeof s === "object" &&
      typeof s.run === "string" &&
      typeof s.index === "number" &&
      typeof s.reason === "string",
  );
}

/** "fvSolution relaxationFactors.equations.U = 0.5, controlDict deltaT = 0.0005" */
export function describeSettings(settings: Record<string, Record<string, string>>): string {
  return Object.entries(settings)
    .flatMap(([file, values]) =>
      Object.entries(values).map(([key, value]) => `${file} ${key} = ${value}`),
    )
    .join(", ");
}

/** What a line about a resume reads: the API's `continuation.resumed_from`, or the agent's. */
type Resume = Pick<ResumedFrom, "attempt" | "time" | "iterations" | "settings"> & {
  /** the agent's record: where a restart without added iterations ends */
  end_time?: AgentResume["end_time"];
  /** a warm start: the neighbouring run it started from (null: its own earlier attempt) */
  source?: string | null;
  source_index?: number | null;
  /** a warm start from two neighbours (the agent's record): the second, and the weight */
  blend?: AgentResume["blend"];
  /** a warm start from a run of another mesh, mapped onto this one by mapFields */
  mapped?: boolean;
};

/**
 * Where an attempt went on from, and what it did differently: "time 0.5 of attempt 1
 * (+500 iterations; changed: fvSolution relaxationFactors.equations.U = 0.5)", or for a
 * warm start "run 4 at time 120" ("… (blended with run 3, weight -1)" from two neighbours,
 * "… (another mesh, mapped by mapFields)" from a run of another mesh).
 */
export function describeResume(resume: Resume): string {
  const what: string[] = [];
  if (resume.iterations != null) what.push(`+${plural(resume.iterations, "iteration")}`);
  else if (resume.end_time != null) what.push(`to time ${formatNumber(resume.end_time, 6)}`);
  else if (!resume.source) what.push("to its end time");
  const changed = describeSettings(resume.settings ?? {});
  if (changed) what.push(`changed: ${changed}`);
  const where = resume.source
    ? `run ${resume.source_index ?? "?"} at time ${resume.time}`
    : `time ${resume.time} of attempt ${resume.attempt}`;
  if (resume.blend) {
    const w = formatNumber(resume.blend.weight, 3);
    what.unshift(`blended with run ${resume.blend.source_index ?? "?"}, weight ${w}`);
  }
  if (resume.mapped) what.unshift("another mesh, mapped by mapFields");
  return what.length ? `${where} (${what.join("; ")})` : where;
}

/**
 * The run page's line: "Went on from time 0.5 of attempt 1 (+500 iterations) — by ada";
 * a warm start "Started from the converged fields of run 4 at time 120 — by the portal".
 */
export function resumedFromLine(resume: Resume & Pick<ResumedFrom, "by">): string {
  const from = resume.source ? "Started from the converged fields of" : "Went on from";
  return `${from} ${describeResume(resume)} — by ${resume.by || "the portal"}`;
}
