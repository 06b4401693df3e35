/**
 * The series a case writes (as inspected at upload, or from its template), and what is wrong
 * with a name the form gives for one.
 */
import type { CaseTemplate } from "@/lib/types";
import type { WizardForm } from "./form";

/** The series a run of the case will send, as inspected (null: not known, anything goes). */
export interface OfferedSeries {
  series: string[];
  openPrefixes: string[];
}

export function offeredSeries(
  form: WizardForm,
  template: CaseTemplate | null,
): OfferedSeries | null {
  const inspection = form.source === "upload" ? form.upload?.inspection : template?.inspection;
  if (!inspection || inspection.errors.length) return null;
  return { series: inspection.series, openPrefixes: inspection.open_prefixes };
}

const LOG_SERIES = ["continuity.", "courant.", "execution."];

/** Why the case cannot send `name` (with the closest offered series), or null when it can. */
export function seriesProblem(name: string, offered: OfferedSeries | null): string | null {
  if (!offered || !name) return null;
  if (offered.series.includes(name)) return null;
  if ([...offered.openPrefixes, ...LOG_SERIES].some((p) => name.startsWith(p))) return null;
  const close = closest(name, offered.series);
  return `the case writes no series named ${name}${close ? `; did you mean ${close}?` : ""}`;
}

function closest(name: string, among: string[]): string | null {
  const lower = name.toLowerCase();
  let best: string | null = null;
  let score = 0;
  for (const s of among) {
    const n = commonChars(lower, s.toLowerCase()) / Math.max(lower.length, s.length);
    if (n > score) [best, score] = [s, n];
  }
  return score >= 0.5 ? best : null;
}

function commonChars(a: string, b: string): number {
  // length of the longest common subsequence: enough to rank near misses
  const row = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    let prev = 0;
    for (let j = 1; j <= b.length; j++) {
      const keep = row[j] ?? 0;
      row[j] = a[i - 1] === b[j - 1] ? prev + 1 : Math.max(keep, row[j - 1] ?? 0);
      prev = keep;
    }
  }
  return row[b.length] ?? 0;
}
