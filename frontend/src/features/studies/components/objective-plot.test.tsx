import { screen, waitFor } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { StudyPlot } from "@/lib/types";
import { renderWithApp } from "@/test/render";
import { ObjectivePlot } from "./objective-plot";

const points = (n: number): StudyPlot => ({
  mode: "points",
  x: "param.aoa",
  y: "objective.Cl",
  color: null,
  z: null,
  total: n,
  last_seq: 3,
  points: {
    run: Array.from({ length: n }, (_, i) => `r${i}`),
    index: Array.from({ length: n }, (_, i) => i),
    x: Array.from({ length: n }, (_, i) => i),
    y: Array.from({ length: n }, (_, i) => i / 10),
    color: Array.from({ length: n }, () => null),
    state: Array.from({ length: n }, () => "completed"),
    trust: Array.from({ length: n }, () => "converged"),
  },
  groups: [],
  heatmap: null,
});

const view = { objective: "Cl", x: "aoa", group: null, mode: "lines" as const };

describe("ObjectivePlot", () => {
  it("plots the points the server answered and says how many runs have the objective", async () => {
    renderWithApp(
      <ObjectivePlot
        plot={points(3)}
        runCount={4}
        parameters={["aoa"]}
        objectives={["Cl"]}
        view={view}
        onViewChange={() => {}}
      />,
    );
    expect(screen.getByTestId("objective-count")).toHaveTextContent("3 of 4 runs have Cl");
    await waitFor(() =>
      expect(screen.getByTestId("objective-plot")).toHaveAttribute("data-points", "3"),
    );
    expect(screen.queryByTestId("objective-binned")).not.toBeInTheDocument();
  });

  it("says what to expect before any run finished", async () => {
    renderWithApp(
      <ObjectivePlot
        plot={points(0)}
        runCount={1}
        parameters={["aoa"]}
        objectives={["Cl"]}
        view={view}
        onViewChange={() => {}}
      />,
    );
    expect(await screen.findByText(/Points appear here as runs complete/)).toBeInTheDocument();
  });

  it("explains a binned plot of many runs", () => {
    renderWithApp(
      <ObjectivePlot
        plot={{
          ...points(0),
          mode: "binned",
          total: 100_000,
          points: null,
          groups: [
            {
              color: null,
              color_low: null,
              color_high: null,
              bins: [{ x: 1, x_low: null, x_high: null, count: 100_000, mean: 1, min: 0, max: 2 }],
            },
          ],
        }}
        runCount={100_000}
        parameters={["aoa"]}
        objectives={["Cl"]}
        view={view}
        onViewChange={() => {}}
      />,
    );
    expect(screen.getByTestId("objective-count")).toHaveTextContent("100,000 of 100,000 runs");
    expect(screen.getByTestId("objective-binned")).toHaveTextContent("mean over a bin of aoa");
  });
});
