/** Formatting in the user's locale. */

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const timeOnly = new Intl.DateTimeFormat(undefined, { timeStyle: "medium" });
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

export function formatDateTime(iso: string | null | undefined): string {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? "—" : dateTime.format(d);
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? "—" : timeOnly.format(d);
}

export function formatRelative(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return "—";
  const seconds = (new Date(iso).getTime() - now) / 1000;
  const abs = Math.abs(seconds);
  if (abs < 45) return relative.format(Math.round(seconds), "second");
  if (abs < 45 * 60) return relative.format(Math.round(seconds / 60), "minute");
  if (abs < 22 * 3600) return relative.format(Math.round(seconds / 3600), "hour");
  return relative.format(Math.round(seconds / 86400), "day");
}

/** 3725 -> "1 h 2 min", 75 -> "1 min 15 s", 9.3 -> "9.3 s" */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = s % 60;
  if (h) return `${h} h ${m} min`;
  return rest ? `${m} min ${rest} s` : `${m} min`;
}

/**
 * A run's wall time: from its start to its end, computed from the timestamps so that a run
 * whose end arrives by a live event (which carries the timestamps, not `wall_seconds`) shows
 * it at once; null until both happened.
 */
export function wallSeconds(run: {
  started_at?: string | null;
  finished_at?: string | null;
  wall_seconds?: number | null;
}): number | null {
  if (run.started_at && run.finished_at) {
    const s = (Date.parse(run.finished_at) - Date.parse(run.started_at)) / 1000;
    if (Number.isFinite(s)) return Math.max(0, s);
  }
  return run.wall_seconds ?? null;
}

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return "—";
  const units = ["B", "kB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });

export function formatInt(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  return integer.format(value);
}

/** A measured value: 4 significant digits, scientific when very small or large. */
export function formatNumber(value: unknown, digits = 4): string {
  if (typeof value === "string") return value;
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value !== "number" || !Number.isFinite(value)) return "—";
  if (value === 0) return "0";
  const abs = Math.abs(value);
  if (abs < 1e-3 || abs >= 1e6) return value.toExponential(digits - 1);
  return Number(value.toPrecision(digits)).toLocaleString(undefined, {
    maximumFractionDigits: 10,
  });
}

/** A memory size given in GB (quota units). */
export function formatGb(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  return `${Number(value.toPrecision(3))} GB`;
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${formatInt(n)} ${n === 1 ? one : many}`;
}

/** Core-hours: 0.0042 -> "0.0042 core-h", 12.345 -> "12.3 core-h". */
export function formatCoreHours(hours: number | null | undefined): string {
  if (hours === null || hours === undefined || !Number.isFinite(hours)) return "—";
  if (hours === 0) return "0 core-h";
  const digits = hours < 1 ? 2 : hours < 100 ? 3 : 4;
  return `${Number(hours.toPrecision(digits))} core-h`;
}

/** A range of core-hours (an estimate's [low, high]) as one figure: "0.08–0.17 core-h". */
export function formatCoreHoursRange([low, high]: number[]): string {
  const [a, b] = [formatCoreHours(low), formatCoreHours(high)];
  return a === b ? a : `${a.replace(" core-h", "")}–${b}`;
}

/** What core-hours count, for tooltips: the one definition (backend studies/figures.py). */
export const CORE_HOURS_HINT =
  "Core-hours: the cores the run held × the wall time of its steps (from its start until its " +
  "steps ended and it gave its cores back). A solver that waits still holds its cores, so " +
  "core-hours are at least its CPU time; the core-hour budget counts them.";
