import { screen, waitFor } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { StudySurrogate } from "@/lib/types";
import { renderWithApp } from "@/test/render";
import { adaptiveProgressText, surrogateTraces } from "../lib/surrogate-traces";
import { SurrogateMap } from "./surrogate-map";

const progress = {
  goal: "map" as const,
  objectives: ["Cl", "Cd"],
  direction: null,
  batch: 3,
  max_batches: 8,
  runs: 24,
  budget: 40,
  batch_size: 4,
  initial: 16,
  tolerance: null,
  end: "",
  end_display: "",
};

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
      { name: "aoa", min: -4, max: 14 },
      { name: "speed", min: 10, max: 40 },
    ],
    grid: {
      x: "aoa",
      y: "speed",
      xs,
      ys,
      fixed: {},
      objectives: {
        Cl: { mean: field(1), std: field(0.1) },
        Cd: { mean: field(2), std: field(0.2) },
      },
    },
    samples,
    observed: { Cl: samples.length, Cd: samples.length },
  };
}

describe("adaptiveProgressText", () => {
  it("says the batch, the most batches, the runs and the budget", () => {
    expect(adaptiveProgressText(progress)).toBe("batch 3 of ≤ 8, 24 of 40 runs");
  });

  it("says why the batches stopped", () => {
    expect(
      adaptiveProgressText({ ...progress, end: "tolerance", end_display: "Tolerance met" }),
    ).toBe("batch 3 of ≤ 8, 24 of 40 runs · stopped: tolerance met");
  });
});

describe("surrogateTraces", () => {
  it("draws the chosen map with the runs on top, the latest batch apart", () => {
    const traces = surrogateTraces(surrogate(3), "Cd", "std") as {
      type: string;
      z?: number[][];
      x?: number[];
    }[];
    expect(traces.map((t) => t.type)).toEqual(["heatmap", "scatter", "scatter"]);
    expect(traces[0]!.z![1]![2]).toBeCloseTo(0.6);
    expect(traces[1]!.x).toHaveLength(6); // the initial design and batch 2
    expect(traces[2]!.x).toHaveLength(2); // batch 3
  });

  it("has nothing to draw before a run completed", () => {
    expect(surrogateTraces({ ...surrogate(1), grid: null }, "Cl", "mean")).toEqual([]);
  });
});

describe("SurrogateMap", () => {
  it("shows the mean and uncertainty maps and the batches' progress, and fills in as batches come", async () => {
    const view = (s: StudySurrogate) => (
      <SurrogateMap
        surrogate={s}
        objective="Cl"
        onObjectiveChange={() => {}}
        axes={{ x: null, y: null }}
        onAxesChange={() => {}}
      />
    );
    const { rerender } = renderWithApp(view(surrogate(2)));
    expect(screen.getByTestId("adaptive-progress")).toHaveTextContent(
      "batch 2 of ≤ 8, 6 of 40 runs",
    );
    // the plot counts a heat map by its 3 columns, plus the 6 runs on each map
    await waitFor(() =>
      expect(screen.getByTestId("surrogate-mean")).toHaveAttribute("data-points", "9"),
    );
    expect(screen.getByTestId("surrogate-std")).toHaveAttribute("data-points", "9");
    rerender(view(surrogate(3)));
    expect(screen.getByTestId("adaptive-progress")).toHaveTextContent(
      "batch 3 of ≤ 8, 8 of 40 runs",
    );
    await waitFor(() =>
      expect(screen.getByTestId("surrogate-mean")).toHaveAttribute("data-points", "11"),
    );
  });

  it("says what to expect before any run completed", () => {
    renderWithApp(
      <SurrogateMap
        surrogate={{ ...surrogate(1), grid: null, samples: [] }}
        objective="Cl"
        onObjectiveChange={() => {}}
        axes={{ x: null, y: null }}
        onAxesChange={() => {}}
      />,
    );
    expect(screen.getAllByText(/The map appears when the first runs complete/)).toHaveLength(2);
  });
});
