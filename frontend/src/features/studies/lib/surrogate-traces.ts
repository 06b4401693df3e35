import type { Data } from "plotly.js";
import { formatInt } from "@/lib/format";
import type { StudySurrogate, SurrogateProgress } from "@/lib/types";

/** Which of the surrogate's two maps: its mean, or its standard deviation (uncertainty). */
export type SurrogateKind = "mean" | "std";

/** "batch 3 of ≤ 8, 24 of 40 runs", and why the batches stopped once they did. */
export function adaptiveProgressText(p: SurrogateProgress): string {
  const text = `batch ${formatInt(p.batch)} of ≤ ${formatInt(p.max_batches)}, ${formatInt(
    p.runs,
  )} of ${formatInt(p.budget)} runs`;
  return p.end ? `${text} · stopped: ${p.end_display.toLowerCase()}` : text;
}

/**
 * One of the surrogate's maps as a heat map over its two parameters, with the runs' points
 * on top (the latest batch in a ring of its own, so a new batch is seen landing).
 */
export function surrogateTraces(s: StudySurrogate, objective: string, kind: SurrogateKind): Data[] {
  const grid = s.grid;
  const field = grid?.objectives[objective];
  if (!grid || !field || !grid.y) return [];
  const x = grid.x;
  const y = grid.y;
  const label = kind === "mean" ? objective : `σ ${objective}`;
  const traces: Data[] = [
    {
      type: "heatmap",
      x: grid.xs,
      y: grid.ys,
      z: field[kind],
      colorscale: kind === "mean" ? "Viridis" : "YlOrRd",
      reversescale: false,
      colorbar: { title: { text: label }, thickness: 12 },
      hovertemplate: `${x}=%{x:.4g}<br>${y}=%{y:.4g}<br>${label}=%{z:.4g}<extra></extra>`,
    } as Data,
  ];
  const samples = s.samples ?? [];
  if (samples.length) {
    const last = Math.max(...samples.map((p) => p.batch));
    for (const latest of [false, true]) {
      const pts = samples.filter((p) => (p.batch === last) === latest);
      if (!pts.length) continue;
      traces.push({
        type: "scatter",
        mode: "markers",
        name: latest ? `batch ${last}` : "earlier runs",
        x: pts.map((p) => p[x]),
        y: pts.map((p) => p[y]),
        customdata: pts.map((p) => p.batch),
        marker: latest
          ? { size: 10, color: "rgba(0,0,0,0)", line: { color: "#ffffff", width: 2.5 } }
          : { size: 6, color: "#ffffff", line: { color: "#222222", width: 1 } },
        hovertemplate: `${x}=%{x:.4g}<br>${y}=%{y:.4g}<br>batch %{customdata}<extra></extra>`,
      } as Data);
    }
  }
  return traces;
}
