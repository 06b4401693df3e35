import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import type { StudySurrogate } from "@/lib/types";
import { renderWithApp } from "@/test/render";
import {
  adaptiveProgressText,
  fixedText,
  goalText,
  surrogateDimensions,
  surrogateGap,
  surrogateHeatmap,
  surrogateLine,
} from "../lib/surrogate-traces";
import { SurrogateMap } from "./surrogate-map";

const progress = {
  goal: "map" as const,
  objectives: ["Cl", "Cd"],
  direction: null,
  directions: {},
  constraints: [],
  batch: 3,
  max_batches: 8 as number | null,
  runs: 24,
  budget: 40,
  batch_size: 4 as number | null,
  initial: 16,
  tolerance: null,
  end: "",
  end_display: "",
};

/** A two-parameter study after `batches` batches: 4 initial runs, then 2 a batch. */
function surrogate(batches: number): StudySurrogate {
  const xs = [-4, 5, 14];
  const ys = [10, 25, 40];
  const field = (k: number) => ys.map((_, j) => xs.map((_, i) => k * (i + j)));
  const samples = Array.from({ length: 4 + 2 * (batches - 1) }, (_, i) => ({
    aoa: -4 + i,
    speed: 10 + i,
    batch: i < 4 ? 1 : 2 + Math.floor((i - 4) / 2),
  }));
  return {
    progress: { ...progress, batch: batches, runs: samples.length },
    parameters: [
      { name: "aoa", min: -4, max: 14, unit: "deg" },
      { name: "speed", min: 10, max: 40, unit: "m/s" },
    ],
    grid: {
      x: "aoa",
      y: "speed",
      xs,
      ys,
      fixed: {},
      fixed_from: null,
      objectives: {
        Cl: { mean: field(1), std: field(0.1) },
        Cd: { mean: field(2), std: field(0.2) },
      },
    },
    samples,
    values: { Cl: samples.map((s) => s.aoa / 10), Cd: samples.map(() => 0.02) },
    observed: { Cl: samples.length, Cd: samples.length },
    needs: 2,
  };
}

/** A one-parameter study: 3 runs done (the last in batch 2), one still running. */
function line(): StudySurrogate {
  const xs = [0, 1, 2, 3, 4];
  return {
    progress: { ...progress, objectives: ["u_min"], batch: 2, runs: 4, budget: 5 },
    parameters: [{ name: "lid_velocity", min: 0, max: 4, unit: "m/s" }],
    grid: {
      x: "lid_velocity",
      y: null,
      xs,
      ys: [],
      fixed: {},
      fixed_from: null,
      objectives: { u_min: { mean: xs.map((x) => -x), std: [0.1, 0.2, 0.3, 0.2, 0.1] } },
    },
    samples: [
      { lid_velocity: 0.5, batch: 1 },
      { lid_velocity: 3.5, batch: 1 },
      { lid_velocity: 2, batch: 2 },
      { lid_velocity: 1, batch: 2 },
    ],
    values: { u_min: [-0.5, -3.5, -2, null] },
    observed: { u_min: 3 },
    needs: 2,
  };
}

describe("adaptiveProgressText", () => {
  it("says the batch, the most batches, the runs and the budget", () => {
    expect(adaptiveProgressText(progress)).toBe("batch 3 of ≤ 8, 24 of 40 runs");
  });

  it("leaves out the most batches when each is sized to what can run when it is made", () => {
    expect(adaptiveProgressText({ ...progress, max_batches: null, batch_size: null })).toBe(
      "batch 3, 24 of 40 runs",
    );
  });

  it("says why the batches stopped", () => {
    expect(
      adaptiveProgressText({ ...progress, end: "tolerance", end_display: "Tolerance met" }),
    ).toBe("batch 3 of ≤ 8, 24 of 40 runs · stopped: tolerance met");
  });
});

describe("goalText", () => {
  it("names the objectives traded off and the way each is better", () => {
    expect(
      goalText(
        {
          ...progress,
          goal: "pareto",
          directions: { LD: "max", Cd: "min" },
          objectives: ["LD", "Cd"],
        },
        "LD",
      ),
    ).toBe("goal: the trade-off of LD (max) and Cd (min)");
  });
});

describe("the surrogate's traces", () => {
  it("draws one parameter as a mean line in a ± 2 std band with the runs' values", () => {
    const s = line();
    expect(surrogateDimensions(s)).toBe(1);
    const traces = surrogateLine(s, "u_min") as {
      name?: string;
      x: number[];
      y: number[];
      fill?: string;
    }[];
    const [upper, lower, mean, runs, latest] = traces;
    expect(upper!.y).toEqual([0.2, -0.6, -1.4, -2.6, -3.8].map((v) => expect.closeTo(v, 9)));
    expect(lower!.fill).toBe("tonexty");
    expect(lower!.name).toBe("mean ± 2 std");
    expect(mean!.y).toEqual([-0, -1, -2, -3, -4]);
    // the completed runs at their values; the running one (no value yet) is not drawn
    expect(runs!.x).toEqual([0.5, 3.5]);
    expect(runs!.y).toEqual([-0.5, -3.5]);
    expect(latest!.name).toBe("batch 2");
    expect(latest!.x).toEqual([2]);
  });

  it("draws two parameters as a heat map of the mean or its uncertainty, the runs on top", () => {
    const s = surrogate(3);
    expect(surrogateDimensions(s)).toBe(2);
    const traces = surrogateHeatmap(s, "Cd", "std") as {
      type: string;
      z?: number[][];
      x?: number[];
    }[];
    expect(traces.map((t) => t.type)).toEqual(["heatmap", "scatter", "scatter"]);
    expect(traces[0]!.z![1]![2]).toBeCloseTo(0.6);
    expect(traces[1]!.x).toHaveLength(6); // the initial design and batch 2
    expect(traces[2]!.x).toHaveLength(2); // batch 3
    expect((surrogateHeatmap(s, "Cd", "mean")[0] as { z: number[][] }).z[1]![2]).toBe(6);
  });

  it("says how many runs a map needs, and when an objective has no values at all", () => {
    const one = { ...line(), grid: null, values: { u_min: [-0.5, null] }, observed: { u_min: 1 } };
    expect(surrogateGap(one, "u_min")).toBe(
      "The map of u_min needs 2 completed runs with a value; 1 so far.",
    );
    const s = surrogate(2);
    const noCd = {
      ...s,
      grid: { ...s.grid!, objectives: { Cl: s.grid!.objectives.Cl! } },
      observed: { Cl: 6, Cd: 0 },
    };
    expect(surrogateGap(noCd, "Cd")).toMatch(/^No run has a value of Cd/);
    expect(surrogateGap(noCd, "Cl")).toBeNull();
  });

  it("says where the parameters off the map are held", () => {
    const s = surrogate(2);
    const held = {
      ...s,
      grid: {
        ...s.grid!,
        fixed: { nu: 0.00002 },
        fixed_from: { index: 7, objective: "Cd", direction: "min" as const, value: 0.0123 },
      },
    };
    expect(fixedText(held)).toBe(
      "Elsewhere nu = 2.000e-5: the values of run 7, the lowest Cd so far (0.0123).",
    );
  });
});

describe("SurrogateMap", () => {
  const view = (s: StudySurrogate, objective = "Cl") => (
    <SurrogateMap
      surrogate={s}
      objective={objective}
      onObjectiveChange={() => {}}
      axes={{ x: null, y: null }}
      onAxesChange={() => {}}
      objectiveSpecs={{ u_min: { series: "returnFlow.min(Ux)", reduce: "last" } }}
    />
  );

  it("draws a one-parameter study as a line with its band, naming the objective and goal", async () => {
    renderWithApp(view(line(), "u_min"));
    expect(screen.getByTestId("surrogate-view")).toHaveAttribute("data-dimensions", "1");
    expect(screen.getByTestId("surrogate-title")).toHaveTextContent(
      "u_min: the surrogate's mean over lid_velocity, with a ± 2 std band",
    );
    expect(screen.getByTestId("surrogate-caption")).toHaveTextContent(
      "u_min is the last value of returnFlow.min(Ux) · goal: map u_min",
    );
    expect(screen.queryByTestId("surrogate-kind")).toBeNull();
    // 5 grid points for each of band, band and mean, and the 3 runs with a value
    await waitFor(() =>
      expect(screen.getByTestId("surrogate-map")).toHaveAttribute("data-points", "18"),
    );
  });

  it("draws two parameters as a heat map, switches to the uncertainty and fills in as batches come", async () => {
    const { rerender } = renderWithApp(view(surrogate(2)));
    expect(screen.getByTestId("surrogate-view")).toHaveAttribute("data-dimensions", "2");
    expect(screen.getByTestId("adaptive-progress")).toHaveTextContent(
      "batch 2 of ≤ 8, 6 of 40 runs",
    );
    expect(screen.getByTestId("surrogate-title")).toHaveTextContent(
      "Cl: the surrogate's mean over aoa and speed",
    );
    // the plot counts a heat map by its 3 columns, plus the 6 runs
    await waitFor(() =>
      expect(screen.getByTestId("surrogate-map")).toHaveAttribute("data-points", "9"),
    );
    await userEvent.click(screen.getByText("Uncertainty"));
    expect(screen.getByTestId("surrogate-title")).toHaveTextContent(
      "Cl: the surrogate's uncertainty (standard deviation) over aoa and speed",
    );
    rerender(view(surrogate(3)));
    expect(screen.getByTestId("adaptive-progress")).toHaveTextContent(
      "batch 3 of ≤ 8, 8 of 40 runs",
    );
    await waitFor(() =>
      expect(screen.getByTestId("surrogate-map")).toHaveAttribute("data-points", "11"),
    );
  });

  it("says how many completed runs the map needs before it has them", () => {
    renderWithApp(
      view({ ...surrogate(1), grid: null, observed: { Cl: 0, Cd: 0 }, values: {} }, "Cl"),
    );
    expect(
      screen.getAllByText("The map of Cl needs 2 completed runs with a value; none so far.").length,
    ).toBeGreaterThan(0);
  });
});
