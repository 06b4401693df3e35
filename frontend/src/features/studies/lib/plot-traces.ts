import type { Data } from "plotly.js";
import { formatNumber } from "@/lib/format";
import type { PlotGroup, RunState, Scalar, StudyPlot } from "@/lib/types";
import type { PlotQuery } from "../api/studies";
import { runFilterToApi, type RunQuery } from "./run-query";

/** What the objective plot shows (the study page keeps it in its URL: obj, x, group, mode). */
export interface ObjectivePlotView {
  objective: string;
  x: string;
  group: string | null;
  mode: "lines" | "heatmap";
}

/** Up to this many colours are a trace each; more are one trace with a colour scale. */
const MAX_COLOR_TRACES = 12;
const PALETTE = [
  "#1c5d99",
  "#e07a1f",
  "#2b9348",
  "#c1121f",
  "#7b2cbf",
  "#00838f",
  "#8d6e63",
  "#5c677d",
  "#d81b60",
  "#9e9d24",
];

/**
 * The plot endpoint's query for a view, with the runs table's filter (`filter`): the plot
 * shows the runs the table lists, completed ones unless the table picks states.
 */
export function plotQueryFor(
  view: ObjectivePlotView,
  filter?: Pick<RunQuery, "state" | "trust" | "ranges">,
): PlotQuery | null {
  if (!view.objective || !view.x) return null;
  const f: Partial<ReturnType<typeof runFilterToApi>> = filter ? runFilterToApi(filter) : {};
  const shared = {
    state: f.state ?? (["completed"] as RunState[]),
    ...(f.trust ? { trust: f.trust } : {}),
    ...(f.param ? { param: f.param } : {}),
    ...(f.objective ? { objective: f.objective } : {}),
  };
  if (view.mode === "heatmap" && view.group)
    return {
      mode: "heatmap",
      x: `param.${view.x}`,
      y: `param.${view.group}`,
      z: `objective.${view.objective}`,
      ...shared,
    };
  return {
    x: `param.${view.x}`,
    y: `objective.${view.objective}`,
    color: view.group ? `param.${view.group}` : null,
    ...shared,
  };
}

function hexToRgba(hex: string, alpha: number): string {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

function colorName(group: string, g: PlotGroup): string {
  if (g.color_low !== null && g.color_high !== null)
    return `${group} ${formatNumber(g.color_low)}–${formatNumber(g.color_high)}`;
  return `${group} = ${formatNumber(g.color)}`;
}

/** Plotly traces for the server's answer: WebGL points, mean lines with min–max bands, or a heat map. */
export function plotTraces(
  plot: StudyPlot,
  {
    objective,
    x,
    group,
    sampled,
  }: { objective: string; x: string; group: string | null; sampled: boolean },
): Data[] {
  if (plot.mode === "heatmap" && plot.heatmap) {
    const h = plot.heatmap;
    return [
      {
        type: "heatmap",
        x: h.x as (string | number)[],
        y: h.y as (string | number)[],
        z: h.mean,
        customdata: h.count,
        colorscale: "Viridis",
        colorbar: { title: { text: objective }, thickness: 12 },
        hovertemplate: `${x}=%{x}<br>${group}=%{y}<br>${objective}=%{z:.4g} (mean of %{customdata} runs)<extra></extra>`,
      } as Data,
    ];
  }
  if (plot.mode === "binned") {
    return plot.groups.flatMap((g, i) => {
      const color = PALETTE[i % PALETTE.length]!;
      const name = group ? colorName(group, g) : objective;
      const xs = g.bins.map((b) => b.x) as (string | number)[];
      const band = {
        type: "scatter",
        x: xs,
        mode: "lines",
        line: { width: 0, color },
        hoverinfo: "skip",
        showlegend: false,
        legendgroup: name,
      };
      return [
        { ...band, y: g.bins.map((b) => b.max), name: `${name} max` } as Data,
        {
          ...band,
          y: g.bins.map((b) => b.min),
          name: `${name} min`,
          fill: "tonexty",
          fillcolor: hexToRgba(color, 0.18),
        } as Data,
        {
          type: "scatter",
          mode: "lines+markers",
          name,
          legendgroup: name,
          x: xs,
          y: g.bins.map((b) => b.mean),
          customdata: g.bins.map((b) => [b.count, b.min, b.max]),
          line: { width: 2, color },
          marker: { size: 5, color },
          hovertemplate: `${x}=%{x}<br>${objective} mean %{y:.5g}, min %{customdata[1]:.5g}, max %{customdata[2]:.5g}<br>%{customdata[0]} runs<extra>${group ? name : ""}</extra>`,
        } as Data,
      ];
    });
  }
  const p = plot.points;
  if (!p) return [];
  const mode = sampled ? "markers" : "lines+markers";
  const trace = (idx: number[], name: string, extra: Record<string, unknown> = {}): Data =>
    ({
      type: "scattergl",
      mode,
      name,
      x: idx.map((i) => p.x[i]) as (string | number)[],
      y: idx.map((i) => p.y[i]),
      customdata: idx.map((i) => p.run[i]),
      text: idx.map((i) => `run ${p.index[i]}`),
      hovertemplate: `%{text}<br>${x}=%{x}<br>${objective}=%{y:.5g}<extra>${group ? name : ""}</extra>`,
      marker: { size: 7 },
      line: { width: 2 },
      ...extra,
    }) as Data;
  const all = p.x.map((_, i) => i);
  if (!group) return [trace(all, objective)];
  const byColor = new Map<string, number[]>();
  for (const i of all) {
    const key = String(p.color[i] ?? "");
    byColor.set(key, [...(byColor.get(key) ?? []), i]);
  }
  if (byColor.size <= MAX_COLOR_TRACES)
    return [...byColor.entries()].map(([, idx]) =>
      trace(idx, `${group} = ${formatNumber(p.color[idx[0]!] as Scalar)}`),
    );
  // many colours (a sampled study): one trace, coloured by the value
  return [
    trace(all, objective, {
      mode: "markers",
      marker: {
        size: 6,
        color: p.color as number[],
        colorscale: "Viridis",
        showscale: true,
        colorbar: { title: { text: group }, thickness: 12 },
      },
    }),
  ];
}
