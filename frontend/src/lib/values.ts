import type { Scalar } from "./types";

/** "0, 2.5, 1e-3, kOmegaSST" -> [0, 2.5, 0.001, "kOmegaSST"]; numbers stay numbers. */
export function parseValueList(text: string): Scalar[] {
  return text
    .split(/[,;\s]+/)
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => (t !== "" && Number.isFinite(Number(t)) ? Number(t) : t));
}

/** A number typed in a text field, or null when it is not one. */
export function parseNumber(text: string | number | null | undefined): number | null {
  if (typeof text === "number") return Number.isFinite(text) ? text : null;
  if (text === null || text === undefined || text.trim() === "") return null;
  const n = Number(text.trim());
  return Number.isFinite(n) ? n : null;
}

export function uniqueInOrder<T>(values: Iterable<T>): T[] {
  const seen = new Set<T>();
  const out: T[] = [];
  for (const v of values) {
    if (!seen.has(v)) {
      seen.add(v);
      out.push(v);
    }
  }
  return out;
}
