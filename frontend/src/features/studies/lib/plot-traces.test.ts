import { describe, expect, it } from "vitest";
import type { StudyPlot } from "@/lib/types";
import { plotQueryFor, plotTraces } from "./plot-traces";

const head = { x: "param.aoa", y: "objective.Cl", z: null, last_seq: 7 };
const view = { objective: "Cl", x: "aoa", sampled: false };

describe("plotTraces", () => {
  it("draws every point with WebGL, a trace per colour value", () => {
    const plot: StudyPlot = {
      ...head,
      color: "param.U",
      mode: "points",
      total: 4,
      points: {
        run: ["a", "b", "c", "d"],
        index: [0, 1, 2, 3],
        x: [0, 4, 0, 4],
        y: [0.1, 0.5, 0.12, 0.55],
        color: [20, 20, 26, 26],
        state: ["completed", "completed", "completed", "completed"],
        trust: ["converged", "converged", "converged", "converged"],
      },
      groups: [],
      heatmap: null,
    };
    const traces = plotTraces(plot, { ...view, group: "U" }) as Record<string, unknown>[];
    expect(traces.map((t) => [t.type, t.name, t.x, t.customdata])).toEqual([
      ["scattergl", "U = 20", [0, 4], ["a", "b"]],
      ["scattergl", "U = 26", [0, 4], ["c", "d"]],
    ]);
  });

  it("draws many runs as a mean line with a min–max band per bin", () => {
    const bin = (x: number, mean: number) => ({
      x,
      x_low: null,
      x_high: null,
      count: 500,
      mean,
      min: mean - 1,
      max: mean + 1,
    });
    const plot: StudyPlot = {
      ...head,
      color: null,
      mode: "binned",
      total: 100_000,
      points: null,
      groups: [{ color: null, color_low: null, color_high: null, bins: [bin(0, 1), bin(4, 2)] }],
      heatmap: null,
    };
    const traces = plotTraces(plot, { ...view, group: null }) as Record<string, unknown>[];
    expect(traces.map((t) => t.type)).toEqual(["scatter", "scatter", "scatter"]);
    expect(traces[0]!.y).toEqual([2, 3]); // the band's top
    expect(traces[1]).toMatchObject({ y: [0, 1], fill: "tonexty" }); // its bottom, filled up
    expect(traces[2]).toMatchObject({ name: "Cl", y: [1, 2], mode: "lines+markers" });
  });

  it("draws two parameters as a heat map of the mean", () => {
    const plot: StudyPlot = {
      ...head,
      z: "objective.Cl",
      y: "param.U",
      color: null,
      mode: "heatmap",
      total: 3,
      points: null,
      groups: [],
      heatmap: {
        x: [0, 4],
        y: [20, 26],
        x_edges: null,
        y_edges: null,
        mean: [
          [0.1, 0.5],
          [0.12, null],
        ],
        count: [
          [1, 1],
          [1, 0],
        ],
      },
    };
    const [trace] = plotTraces(plot, { ...view, group: "U" }) as Record<string, unknown>[];
    expect(trace).toMatchObject({ type: "heatmap", x: [0, 4], y: [20, 26] });
    expect(trace!.z).toEqual([
      [0.1, 0.5],
      [0.12, null],
    ]);
  });
});

describe("plotQueryFor", () => {
  it("asks for a heat map of the two parameters, or points coloured by the second", () => {
    expect(plotQueryFor({ objective: "Cl", x: "aoa", group: "U", mode: "heatmap" })).toEqual({
      mode: "heatmap",
      x: "param.aoa",
      y: "param.U",
      z: "objective.Cl",
      state: ["completed"],
    });
    expect(plotQueryFor({ objective: "Cl", x: "aoa", group: "U", mode: "lines" })).toEqual({
      x: "param.aoa",
      y: "objective.Cl",
      color: "param.U",
      state: ["completed"],
    });
  });

  it("follows the runs table's filter: its states, trust and ranges, in the API's spelling", () => {
    const filter = {
      state: ["completed", "failed"] as const,
      trust: ["converged"] as const,
      ranges: [
        { column: "param.aoa", low: 2, high: 8 },
        { column: "objective.Cl", low: 0.5, high: null },
      ],
    };
    expect(
      plotQueryFor(
        { objective: "Cl", x: "aoa", group: null, mode: "lines" },
        { ...filter, state: [...filter.state], trust: [...filter.trust] },
      ),
    ).toEqual({
      x: "param.aoa",
      y: "objective.Cl",
      color: null,
      state: ["completed", "failed"],
      trust: ["converged"],
      param: ["aoa:2..8"],
      objective: ["Cl:0.5.."],
    });
    // no state picked in the table: the completed runs, the ones with objectives
    expect(
      plotQueryFor(
        { objective: "Cl", x: "aoa", group: "U", mode: "heatmap" },
        { state: [], trust: [], ranges: [{ column: "param.U", low: null, high: 30 }] },
      ),
    ).toEqual({
      mode: "heatmap",
      x: "param.aoa",
      y: "param.U",
      z: "objective.Cl",
      state: ["completed"],
      param: ["U:..30"],
    });
  });
});
