import { fireEvent, screen, within } from "@testing-library/react";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Run, RunState } from "@/lib/types";
import { renderWithApp } from "@/test/render";
import { RunsTable } from "./runs-table";

const STATES: RunState[] = ["completed", "running", "pending", "failed"];

function runs(n: number): Run[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `run-${i}`,
    study: "s",
    index: i,
    parameters: { aoa: (i % 21) - 10, speed: 20 + (i % 3) * 6 },
    objectives: i % 4 === 0 ? { Cl: i / 1000 } : {},
    state: STATES[i % 4],
    backend: "local",
    queue_position: null,
    queued_at: "2026-01-01T00:00:00Z",
    wall_seconds: 12.5,
    started_at: "2026-01-01T00:00:01Z",
  })) as unknown as Run[];
}

describe("RunsTable", () => {
  // jsdom has no layout: give elements the size of a real table frame
  const original = Object.getOwnPropertyDescriptors(Element.prototype);
  beforeAll(() => {
    Object.defineProperty(Element.prototype, "clientHeight", {
      configurable: true,
      get: () => 440,
    });
    Object.defineProperty(Element.prototype, "clientWidth", {
      configurable: true,
      get: () => 1200,
    });
  });
  afterAll(() => {
    Object.defineProperty(Element.prototype, "clientHeight", original.clientHeight!);
    Object.defineProperty(Element.prototype, "clientWidth", original.clientWidth!);
  });

  it("keeps only the visible rows in the DOM, even for 10,000 runs", () => {
    renderWithApp(
      <RunsTable
        runs={runs(10_000)}
        parameters={["aoa", "speed"]}
        objectives={["Cl"]}
        selected={new Set()}
        onToggleSelect={() => {}}
        filter="all"
        onFilterChange={() => {}}
      />,
    );
    const table = screen.getByRole("table", { name: "Runs" });
    expect(table).toHaveAttribute("aria-rowcount", "10000");
    const rendered = within(table).queryAllByRole("row").length;
    expect(rendered).toBeGreaterThan(5);
    expect(rendered).toBeLessThan(60);
    expect(screen.getByText("All 10000")).toBeInTheDocument();
    expect(screen.getByText("Active 5000")).toBeInTheDocument();
  });

  it("filters by state and selects runs for the residual overlay", () => {
    const onToggle = vi.fn();
    const onFilter = vi.fn();
    renderWithApp(
      <RunsTable
        runs={runs(8)}
        parameters={["aoa"]}
        objectives={["Cl"]}
        selected={new Set(["run-0"])}
        onToggleSelect={onToggle}
        filter="failed"
        onFilterChange={onFilter}
      />,
    );
    // only the failed runs (3 and 7) are listed
    expect(screen.getByTestId("run-row-3")).toBeInTheDocument();
    expect(screen.queryByTestId("run-row-0")).not.toBeInTheDocument();
    fireEvent.click(screen.getByRole("checkbox", { name: "Show residuals of run 7" }));
    expect(onToggle).toHaveBeenCalledWith("run-7");
    fireEvent.click(screen.getByText("Completed 2"));
    expect(onFilter).toHaveBeenCalledWith("completed");
  });
});
