/**
 * Build-time settings (VITE_*), validated once at start so a bad value fails loudly instead
 * of leaking NaN into polling intervals.
 */
function positiveInt(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) {
    throw new Error(`${name} must be a positive whole number (milliseconds), got ${raw}`);
  }
  return value;
}

function basePath(raw: string | undefined): string {
  if (!raw) return "";
  if (!/^(https?:\/\/[^/]+)?(\/[\w\-./]*)?$/.test(raw)) {
    throw new Error(`VITE_API_BASE must be an origin or a path, got ${raw}`);
  }
  return raw.replace(/\/$/, "");
}

export const env = Object.freeze({
  /** Where the API lives; empty = same origin (production, and the Vite proxy in dev). */
  apiBase: basePath(import.meta.env.VITE_API_BASE),
  /** How often live views poll while something runs. */
  pollMs: positiveInt("VITE_POLL_MS", import.meta.env.VITE_POLL_MS, 2000),
});
