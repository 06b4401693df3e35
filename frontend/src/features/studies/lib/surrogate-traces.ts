import type { Data } from "plotly.js";
import { formatInt, formatNumber, plural } from "@/lib/format";
import type { StudySurrogate, SurrogateProgress } from "@/lib/types";

/** Which of the surrogate's fields a heat map shows: its mean, or its standard deviation. */
export type SurrogateKind = "mean" | "std";

/** How wide the 1-D band is, in standard deviations (about 95 % of a normal belief). */
export const BAND_STD = 2;

/** "batch 3 of ≤ 8, 24 of 40 runs" ("batch 3, 24 of 40 runs" when each batch is sized to
 * what can run when it is made), and why the batches stopped once they did. */
export function adaptiveProgressText(p: SurrogateProgress): string {
  const of = p.max_batches !== null ? ` of ≤ ${formatInt(p.max_batches)}` : "";
  const text = `batch ${formatInt(p.batch)}${of}, ${formatInt(p.runs)} of ${formatInt(p.budget)} runs`;
  return p.end ? `${text} · stopped: ${p.end_display.toLowerCase()}` : text;
}

/** What the surrogate is after: "goal: map u_min", "goal: minimise Cd" or "goal: the
 * trade-off of LD (max) and Cd (min)". */
export function goalText(p: SurrogateProgress, objective: string): string {
  if (p.goal === "pareto") {
    const named = p.objectives.map((o) => (p.directions[o] ? `${o} (${p.directions[o]})` : o));
    const last = named.pop() ?? objective;
    return `goal: the trade-off of ${named.length ? `${named.join(", ")} and ${last}` : last}`;
  }
  if (p.goal === "optimise")
    return `goal: ${p.direction === "min" ? "minimise" : "maximise"} ${p.objectives[0] ?? objective}`;
  return `goal: map ${p.objectives.join(", ")}`;
}

/** A parameter's axis title: its name and, when its template gives one, its unit. */
export function axisTitle(s: StudySurrogate, name: string): string {
  const unit = s.parameters.find((p) => p.name === name)?.unit;
  return unit ? `${name} (${unit})` : name;
}

/** The map the surrogate can draw: a line over one parameter, a heat map over two. */
export function surrogateDimensions(s: StudySurrogate): 1 | 2 {
  return s.parameters.length === 1 || (s.grid !== null && s.grid !== undefined && !s.grid.y)
    ? 1
    : 2;
}

/**
 * Why there is no map of `objective` yet, or null when there is one: too few completed runs
 * (and how many it needs), or runs that ended without a value of it.
 */
export function surrogateGap(s: StudySurrogate, objective: string): string | null {
  if (s.grid?.objectives[objective]) return null;
  const have = s.observed?.[objective] ?? 0;
  const needs = s.needs ?? 2;
  // the batches stopped, or other objectives have values where this one has none
  const others = Object.entries(s.observed ?? {}).some(([o, n]) => o !== objective && n >= needs);
  if (have === 0 && (s.progress.end !== "" || others))
    return `No run has a value of ${objective}: the runs ended without it (check that the case writes the series it reads).`;
  return `The map of ${objective} needs ${plural(needs, "completed run")} with a value; ${
    have === 0 ? "none so far" : `${formatInt(have)} so far`
  }.`;
}

/** The parameters held off a map of more than two, and where ("at run 7's values, the lowest Cd so far"). */
export function fixedText(s: StudySurrogate): string {
  const grid = s.grid;
  const fixed = Object.entries(grid?.fixed ?? {});
  if (!grid || !fixed.length) return "";
  const values = fixed.map(([k, v]) => `${k} = ${formatNumber(v)}`).join(", ");
  const from = grid.fixed_from;
  if (!from) return `Elsewhere ${values} (mid-range: no run has a value yet).`;
  const best = from.direction === "min" ? "lowest" : "highest";
  return `Elsewhere ${values}: the values of run ${from.index}, the ${best} ${from.objective} so far (${formatNumber(from.value)}).`;
}

interface Sample {
  x: number;
  y: number | null;
  batch: number;
}

/** The runs' points, latest batch apart: [earlier runs, the latest batch]. */
function splitBatches<T extends { batch: number }>(points: T[]): [T[], T[], number] {
  const last = points.length ? Math.max(...points.map((p) => p.batch)) : 0;
  return [points.filter((p) => p.batch !== last), points.filter((p) => p.batch === last), last];
}

/**
 * A one-parameter surrogate of `objective`: its mean as a line inside a band of ± 2 standard
 * deviations, with the completed runs' values as points (the latest batch ringed).
 * `ink` colours the line and the points; the band is the same colour, faint.
 */
export function surrogateLine(s: StudySurrogate, objective: string, ink = "#1c5d99"): Data[] {
  const grid = s.grid;
  const field = grid?.objectives[objective];
  if (!grid || !field || grid.y) return [];
  const x = grid.x;
  const mean = field.mean as number[];
  const std = field.std as number[];
  const upper = mean.map((m, i) => m + BAND_STD * (std[i] ?? 0));
  const lower = mean.map((m, i) => m - BAND_STD * (std[i] ?? 0));
  const band = `mean ± ${BAND_STD} std`;
  const traces: Data[] = [
    {
      type: "scatter",
      mode: "lines",
      x: grid.xs,
      y: upper,
      line: { width: 0 },
      hoverinfo: "skip",
      showlegend: false,
      legendgroup: "band",
    },
    {
      type: "scatter",
      mode: "lines",
      x: grid.xs,
      y: lower,
      fill: "tonexty",
      fillcolor: fade(ink, 0.2),
      line: { width: 0 },
      name: band,
      legendgroup: "band",
      customdata: std,
      hovertemplate: `${x}=%{x:.4g}<br>${objective} − ${BAND_STD} std=%{y:.4g}<extra></extra>`,
    },
    {
      type: "scatter",
      mode: "lines",
      x: grid.xs,
      y: mean,
      line: { color: ink, width: 2 },
      name: `${objective}: the surrogate's mean`,
      customdata: std,
      hovertemplate: `${x}=%{x:.4g}<br>${objective}=%{y:.4g} ± %{customdata:.3g} (1 std)<extra></extra>`,
    },
  ];
  const values = s.values?.[objective] ?? [];
  const points: Sample[] = (s.samples ?? []).flatMap((p, i) => {
    const v = values[i];
    return v === null || v === undefined ? [] : [{ x: p[x] as number, y: v, batch: p.batch }];
  });
  const [earlier, latest, last] = splitBatches(points);
  if (earlier.length)
    traces.push(runMarkers(earlier, "runs", { size: 7, color: ink }, x, objective));
  if (latest.length)
    traces.push(
      runMarkers(
        latest,
        `batch ${last}`,
        { size: 11, color: "rgba(0,0,0,0)", line: { color: ink, width: 2.5 } },
        x,
        objective,
      ),
    );
  return traces;
}

function runMarkers(
  pts: Sample[],
  name: string,
  marker: Record<string, unknown>,
  x: string,
  y: string,
): Data {
  return {
    type: "scatter",
    mode: "markers",
    name,
    x: pts.map((p) => p.x),
    y: pts.map((p) => p.y),
    customdata: pts.map((p) => p.batch),
    marker,
    hovertemplate: `${x}=%{x:.4g}<br>${y}=%{y:.4g}<br>batch %{customdata}<extra></extra>`,
  } as Data;
}

/** `#rrggbb` at `alpha`. */
function fade(hex: string, alpha: number): string {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
}

/**
 * A two-parameter surrogate of `objective` as a heat map (its mean, or its standard
 * deviation), the other field on hover, with the runs' points on top (the latest batch in a
 * ring of its own, so a new batch is seen landing).
 */
export function surrogateHeatmap(
  s: StudySurrogate,
  objective: string,
  kind: SurrogateKind,
): Data[] {
  const grid = s.grid;
  const field = grid?.objectives[objective];
  if (!grid || !field || !grid.y) return [];
  const x = grid.x;
  const y = grid.y;
  const label = kind === "mean" ? objective : `std ${objective}`;
  const other = kind === "mean" ? field.std : field.mean;
  const traces: Data[] = [
    {
      type: "heatmap",
      x: grid.xs,
      y: grid.ys,
      z: field[kind],
      customdata: other,
      colorscale: kind === "mean" ? "Viridis" : "YlOrRd",
      reversescale: false,
      colorbar: { title: { text: label }, thickness: 12 },
      hovertemplate:
        kind === "mean"
          ? `${x}=%{x:.4g}<br>${y}=%{y:.4g}<br>${objective}=%{z:.4g} ± %{customdata:.3g} (1 std)<extra></extra>`
          : `${x}=%{x:.4g}<br>${y}=%{y:.4g}<br>std=%{z:.3g} (mean %{customdata:.4g})<extra></extra>`,
    } as Data,
  ];
  const [earlier, latest, last] = splitBatches(s.samples ?? []);
  for (const [pts, isLatest] of [
    [earlier, false],
    [latest, true],
  ] as const) {
    if (!pts.length) continue;
    traces.push({
      type: "scatter",
      mode: "markers",
      name: isLatest ? `batch ${last}` : "earlier runs",
      x: pts.map((p) => p[x]),
      y: pts.map((p) => p[y]),
      customdata: pts.map((p) => p.batch),
      marker: isLatest
        ? { size: 10, color: "rgba(0,0,0,0)", line: { color: "#ffffff", width: 2.5 } }
        : { size: 6, color: "#ffffff", line: { color: "#222222", width: 1 } },
      hovertemplate: `${x}=%{x:.4g}<br>${y}=%{y:.4g}<br>batch %{customdata}<extra></extra>`,
    } as Data);
  }
  return traces;
}
