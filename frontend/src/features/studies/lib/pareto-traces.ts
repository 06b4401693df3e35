import type { Data } from "plotly.js";
import { formatInt, formatNumber, plural } from "@/lib/format";
import type {
  Direction,
  Pareto,
  ParetoConstraint,
  ParetoObjective,
  ParetoRun,
  StudySpec,
} from "@/lib/types";

/** An objective and the way it is better, as the front is asked for: "LD:max". */
export interface FrontGoal {
  name: string;
  direction: Direction;
}

/** The colours of the runs on the front, the dominated ones (faded) and the infeasible ones. */
export interface FrontColours {
  front: string;
  others: string;
  infeasible: string;
}

/**
 * Whether a study's own plan says what its front is: an adaptive study that trades off
 * objectives (goal pareto) or keeps some within a range (constraints). Its front needs no
 * objectives picked, and is what its batches are after.
 */
export function isFrontStudy(spec: StudySpec | undefined): boolean {
  const adaptive = spec?.adaptive;
  if (spec?.combine !== "adaptive" || !adaptive) return false;
  return adaptive.goal === "pareto" || Object.keys(adaptive.constraints ?? {}).length > 0;
}

/** The `objectives` query of the front of `goals`: "LD:max,Cd:min". */
export function goalsQuery(goals: FrontGoal[]): string {
  return goals.map((g) => `${g.name}:${g.direction}`).join(",");
}

/** "LD (max ↑)" or "Cd (min ↓)": an axis says which way is better. */
export function directionTitle(o: ParetoObjective): string {
  return `${o.name} (${o.direction === "min" ? "min ↓" : "max ↑"})`;
}

/** The range alone: "≥ 0.5", "≤ 0.02" or "0.2 … 0.8". */
function rangeText(c: ParetoConstraint): string {
  if (c.min !== null && c.max !== null) return `${formatNumber(c.min)} … ${formatNumber(c.max)}`;
  if (c.min !== null) return `≥ ${formatNumber(c.min)}`;
  if (c.max !== null) return `≤ ${formatNumber(c.max)}`;
  return "any";
}

/** "Cl ≥ 0.5", "Cd ≤ 0.02" or "0.2 ≤ Cl ≤ 0.8". */
export function constraintText(c: ParetoConstraint): string {
  if (c.min !== null && c.max !== null)
    return `${formatNumber(c.min)} ≤ ${c.objective} ≤ ${formatNumber(c.max)}`;
  return `${c.objective} ${rangeText(c)}`;
}

/** "LD and Cd", "LD, Cd and Cl" (or with "or"). */
function listed(names: string[], last = "and"): string {
  return names.length < 2
    ? (names[0] ?? "")
    : `${names.slice(0, -1).join(", ")} ${last} ${names[names.length - 1]}`;
}

function value(run: ParetoRun, name: string): number | null {
  const v = run.values[name];
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** One axis of the plot: an objective, a constrained quantity, or the run's index. */
export interface FrontAxis {
  title: string;
  value: (run: ParetoRun) => number | null;
}

/**
 * The plot's axes: one per objective; a front of one objective (an optimisation within
 * constraints) is drawn against its first constrained quantity, else against the run.
 */
export function frontAxes(p: Pareto): FrontAxis[] {
  const axes = p.objectives.map((o) => ({
    title: directionTitle(o),
    value: (r: ParetoRun) => value(r, o.name),
  }));
  if (axes.length !== 1) return axes;
  const other = p.constraints.find((c) => c.objective !== p.objectives[0]?.name);
  const beside: FrontAxis = other
    ? { title: `${other.objective} (${rangeText(other)})`, value: (r) => value(r, other.objective) }
    : { title: "run", value: (r) => r.index };
  return [beside, ...axes];
}

/** The quantities a run's hover names: the objectives, then the constrained ones. */
function quantities(p: Pareto): string[] {
  const names = p.objectives.map((o) => o.name);
  for (const c of p.constraints) if (!names.includes(c.objective)) names.push(c.objective);
  return names;
}

/** Why a run is not feasible: "no Cd", "Cl 0.42, needs ≥ 0.5". */
function whyInfeasible(p: Pareto, run: ParetoRun): string[] {
  const reasons = quantities(p)
    .filter((q) => value(run, q) === null)
    .map((q) => `no ${q}`);
  for (const c of p.constraints) {
    const v = value(run, c.objective);
    if (v === null) continue;
    if ((c.min !== null && v < c.min) || (c.max !== null && v > c.max))
      reasons.push(`${c.objective} ${formatNumber(v)}, needs ${rangeText(c)}`);
  }
  return reasons;
}

/** "run 12 · batch 3 · LD 14.2 · Cd 0.021", and why an infeasible run is. */
export function runHover(p: Pareto, run: ParetoRun): string {
  const parts = [`run ${run.index}`];
  if (run.batch !== null) parts.push(`batch ${run.batch}`);
  for (const q of quantities(p)) {
    const v = value(run, q);
    if (v !== null) parts.push(`${q} ${formatNumber(v)}`);
  }
  const text = parts.join(" · ");
  if (run.feasible) return text;
  const why = whyInfeasible(p, run);
  return why.length ? `${text}<br>infeasible: ${why.join("; ")}` : text;
}

type Group = "front" | "dominated" | "infeasible";

function groupOf(run: ParetoRun): Group {
  return run.front ? "front" : run.feasible ? "dominated" : "infeasible";
}

/**
 * The runs as Plotly traces, the infeasible ones first (grey "x"), then the dominated ones
 * (faded), then the front on top (solid). Two objectives: a 2-D scatter, the front joined by
 * the staircase of what it dominates, in order of the first objective; three: a 3-D scatter.
 * A run's id is its `customdata` (a click opens it). Runs without a value on every axis
 * cannot be placed and are left out.
 */
export function frontTraces(p: Pareto, colours: FrontColours): Data[] {
  const axes = frontAxes(p);
  const three = axes.length === 3;
  const placed = p.runs.filter((r) => axes.every((a) => a.value(r) !== null));
  const first = axes[0]!;
  const second = axes[1]!;
  const groups: Record<Group, ParetoRun[]> = { front: [], dominated: [], infeasible: [] };
  for (const r of placed) groups[groupOf(r)].push(r);
  // in order of the first objective, so the line goes along the front
  groups.front.sort(
    (a, b) => first.value(a)! - first.value(b)! || second.value(a)! - second.value(b)!,
  );
  // Between two neighbours the line turns at the corner that is worse in both objectives:
  // along x first when x is minimised, along y first when it is maximised.
  const shape = p.objectives[0]?.direction === "min" ? "hv" : "vh";
  const style: Record<Group, Record<string, unknown>> = {
    infeasible: {
      mode: "markers",
      marker: { symbol: "x", size: three ? 4 : 7, color: colours.infeasible },
    },
    dominated: {
      mode: "markers",
      marker: { size: three ? 4 : 7, color: colours.others },
      opacity: 0.45,
    },
    // a line joins the front of two objectives only (one objective's is its best run)
    front:
      p.objectives.length === 2
        ? {
            mode: "lines+markers",
            marker: { size: 10, color: colours.front },
            line: { color: colours.front, width: 1.5, shape },
          }
        : { mode: "markers", marker: { size: three ? 6 : 10, color: colours.front } },
  };
  const traces: Data[] = [];
  for (const group of ["infeasible", "dominated", "front"] as const) {
    const runs = groups[group];
    if (!runs.length) continue;
    traces.push({
      type: three ? "scatter3d" : "scatter",
      name: group === "front" ? "on the front" : group,
      x: runs.map((r) => first.value(r)),
      y: runs.map((r) => second.value(r)),
      ...(three ? { z: runs.map((r) => axes[2]!.value(r)) } : {}),
      customdata: runs.map((r) => r.id),
      text: runs.map((r) => runHover(p, r)),
      hovertemplate: "%{text}<extra></extra>",
      ...style[group],
    } as Data);
  }
  return traces;
}

/** The front's hypervolume as a share of the box, after each batch (in per cent). */
export function historyTraces(p: Pareto, colour: string): Data[] {
  if (!p.history.length) return [];
  return [
    {
      type: "scatter",
      mode: "lines+markers",
      name: "hypervolume",
      x: p.history.map((h) => h.batch),
      y: p.history.map((h) => 100 * h.hypervolume_share),
      text: p.history.map(
        (h) =>
          `batch ${h.batch} · ${plural(h.runs, "run")} · ${percent(h.hypervolume_share)} of the box`,
      ),
      hovertemplate: "%{text}<extra></extra>",
      marker: { size: 6, color: colour },
      line: { color: colour, width: 2 },
    },
  ];
}

/** 0.834 → "83 %" (below 1 %: "< 1 %"). */
export function percent(share: number): string {
  const pc = 100 * share;
  return pc > 0 && pc < 0.5 ? "< 1 %" : `${Math.round(pc)} %`;
}

/**
 * "9 runs on the front of 31 feasible (40 completed) · hypervolume 83 % of the box", with the
 * completed runs that lack a value of an objective.
 */
export function frontSummary(p: Pareto): string {
  const names = p.objectives.map((o) => o.name);
  const missing = p.missing
    ? `, ${formatInt(p.missing)} without a value of ${listed(names, "or")}`
    : "";
  const text = `${plural(p.front_size, "run")} on the front of ${formatInt(p.feasible)} feasible (${formatInt(p.completed)} completed${missing})`;
  return p.hypervolume_share !== null
    ? `${text} · hypervolume ${percent(p.hypervolume_share)} of the box`
    : text;
}

/** The plot's accessible name: "Pareto front of LD and Cd". */
export function frontLabel(p: Pareto): string {
  const names = p.objectives.map((o) => o.name);
  if (names.length === 1)
    return `Best ${names[0]} within ${listed(p.constraints.map(constraintText))}`;
  return `Pareto front of ${listed(names)}`;
}

/** Why the plot is empty: no completed run has a value on each of its axes. */
export function frontGap(p: Pareto): string {
  const names = p.objectives.map((o) => o.name);
  if (names.length === 1) return `No completed run has a value of ${names[0]} yet.`;
  return `No completed run has values of ${names.length === 2 ? "both" : "all of"} ${listed(names)} yet.`;
}
