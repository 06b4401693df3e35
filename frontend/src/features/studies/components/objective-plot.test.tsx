import { screen, waitFor } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Run } from "@/lib/types";
import { renderWithApp } from "@/test/render";
import { ObjectivePlot } from "./objective-plot";

const run = (i: number, aoa: number, speed: number, state: Run["state"], Cl?: number): Run =>
  ({
    id: `r${i}`,
    index: i,
    state,
    parameters: { aoa, speed },
    objectives: Cl === undefined ? {} : { Cl },
  }) as unknown as Run;

describe("ObjectivePlot", () => {
  const runs = [
    run(0, 0, 20, "completed", 0.1),
    run(1, 4, 20, "completed", 0.5),
    run(2, 0, 26, "completed", 0.12),
    run(3, 4, 26, "running"),
  ];

  it("plots the runs that finished, one line per value of the second parameter", async () => {
    renderWithApp(
      <ObjectivePlot
        runs={runs}
        parameters={["aoa", "speed"]}
        objectives={["Cl"]}
        view={{ objective: "Cl", x: "aoa", group: "speed", mode: "lines" }}
        onViewChange={() => {}}
      />,
    );
    expect(screen.getByTestId("objective-count")).toHaveTextContent("3 of 4 runs have Cl");
    await waitFor(() =>
      expect(screen.getByTestId("objective-plot")).toHaveAttribute("data-points", "3"),
    );
  });

  it("says what to expect before any run finished", async () => {
    renderWithApp(
      <ObjectivePlot
        runs={[run(0, 0, 20, "running")]}
        parameters={["aoa"]}
        objectives={["Cl"]}
        view={{ objective: "Cl", x: "aoa", group: null, mode: "lines" }}
        onViewChange={() => {}}
      />,
    );
    expect(await screen.findByText(/Points appear here as runs complete/)).toBeInTheDocument();
  });
});
