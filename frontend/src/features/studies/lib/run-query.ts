import type { RunState, Trust } from "@/lib/types";

/** A filter on a parameter or an objective: `param.aoa` between low and high (either open). */
export interface RangeFilter {
  column: string; // "param.NAME" | "objective.NAME"
  low: number | null;
  high: number | null;
}

/** What a runs table shows: filters, sort and page, all answered by the server. */
export interface RunQuery {
  state: RunState[];
  trust: Exclude<Trust, "">[];
  ranges: RangeFilter[];
  /** `-objective.Cl`, `param.aoa`, `state`, …; null: the list's own order */
  ordering: string | null;
  page: number;
  /** runs across studies: one study's, one backend's */
  study: string | null;
  backend: string | null;
}

export const RUNS_PAGE_SIZE = 100;

const STATES: readonly RunState[] = [
  "pending",
  "admitted",
  "provisioning",
  "running",
  "completed",
  "failed",
  "cancelled",
];
const TRUSTS = ["converged", "iteration_limit", "not_converged", "diverged", "unsteady"] as const;

function list<T extends string>(raw: string | null, allowed: readonly T[]): T[] {
  return (raw ?? "").split(",").filter((v): v is T => (allowed as readonly string[]).includes(v));
}

function bound(text: string): number | null {
  if (text.trim() === "") return null;
  const n = Number(text);
  return Number.isFinite(n) ? n : null;
}

/** `param.aoa:2..8` ↔ a range (the URL's and the API's spelling, with the column's kind). */
export function parseRange(text: string): RangeFilter | null {
  const at = text.lastIndexOf(":");
  if (at <= 0) return null;
  const column = text.slice(0, at);
  const [low = "", high = ""] = text.slice(at + 1).split("..");
  if (!/^(param|objective)\..+/.test(column)) return null;
  const r = { column, low: bound(low), high: bound(high) };
  return r.low === null && r.high === null ? null : r;
}

export function formatRange(r: RangeFilter): string {
  return `${r.column}:${r.low ?? ""}..${r.high ?? ""}`;
}

/** The table's query from the page's URL (`state=running,pending&range=param.aoa:2..8&sort=-objective.Cl&page=2`). */
export function runQueryFromSearch(params: URLSearchParams): RunQuery {
  const page = Number(params.get("page"));
  return {
    state: list(params.get("state"), STATES),
    trust: list(params.get("trust"), TRUSTS),
    ranges: params
      .getAll("range")
      .map(parseRange)
      .filter((r): r is RangeFilter => r !== null),
    ordering: params.get("sort") || null,
    page: Number.isInteger(page) && page > 1 ? page : 1,
    study: params.get("study") || null,
    backend: params.get("backend") || null,
  };
}

/** The URL with a changed query; any change of filter or sort goes back to page 1. */
export function runQueryToSearch(
  params: URLSearchParams,
  patch: Partial<RunQuery>,
): URLSearchParams {
  const next = new URLSearchParams(params);
  const q = { ...runQueryFromSearch(params), ...patch };
  if (!("page" in patch)) q.page = 1;
  const set = (key: string, value: string | null) =>
    value ? next.set(key, value) : next.delete(key);
  set("state", q.state.join(","));
  set("trust", q.trust.join(","));
  next.delete("range");
  for (const r of q.ranges) next.append("range", formatRange(r));
  set("sort", q.ordering);
  set("page", q.page > 1 ? String(q.page) : null);
  set("study", q.study);
  set("backend", q.backend);
  return next;
}

/** The filter of a table query as the API spells it: the runs list and the objective plot
 * take the same parameters (docs/api.md, "Runs: filter and sort"). */
export function runFilterToApi(q: Pick<RunQuery, "state" | "trust" | "ranges">) {
  const terms = (kind: string) =>
    q.ranges
      .filter((r) => r.column.startsWith(`${kind}.`))
      .map((r) => `${r.column.slice(kind.length + 1)}:${r.low ?? ""}..${r.high ?? ""}`);
  const param = terms("param");
  const objective = terms("objective");
  return {
    state: q.state.length ? q.state : undefined,
    trust: q.trust.length ? q.trust : undefined,
    param: param.length ? param : undefined,
    objective: objective.length ? objective : undefined,
  };
}

/** The API's query parameters of a table query (docs/api.md, "Runs: filter and sort"). */
export function runQueryToApi(q: RunQuery, pageSize = RUNS_PAGE_SIZE) {
  return {
    ...runFilterToApi(q),
    ordering: q.ordering ?? undefined,
    page: q.page > 1 ? q.page : undefined,
    page_size: pageSize,
    study: q.study ?? undefined,
    backend: q.backend ?? undefined,
  };
}

/** The table's filter in words ("state completed · trust converged · aoa 2 to 8"), or "" when
 * it filters nothing: said above the objective plot, which shows the same runs. */
export function describeRunFilter(q: Pick<RunQuery, "state" | "trust" | "ranges">): string {
  const parts: string[] = [];
  if (q.state.length) parts.push(`state ${q.state.join(", ")}`);
  if (q.trust.length) parts.push(`trust ${q.trust.join(", ")}`);
  for (const r of q.ranges) {
    const name = r.column.slice(r.column.indexOf(".") + 1);
    if (r.low !== null && r.high !== null) parts.push(`${name} ${r.low} to ${r.high}`);
    else if (r.low !== null) parts.push(`${name} ≥ ${r.low}`);
    else parts.push(`${name} ≤ ${r.high}`);
  }
  return parts.join(" · ");
}
