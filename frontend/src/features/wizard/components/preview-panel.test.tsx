import { screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Preview, QuotaImpact } from "@/lib/types";
import { renderWithApp } from "@/test/render";
import { PreviewPanel } from "./preview-panel";

const amounts = { cores: 0, memory_gb: 0, nodes: 0, runs: 0, queued_runs: 0 };

function preview(quota: Partial<QuotaImpact>): Preview {
  return {
    run_count: 3,
    checked_runs: 3,
    parameters: [],
    rows: [],
    solver: "icoFoam",
    backend: "local",
    resources: { processes: 1, nodes: 1, memory_gb: 1 },
    steps: [],
    objectives: {},
    adaptive: null,
    estimate: {
      based_on: 0,
      runs: 3,
      run_core_hours: null,
      run_wall_seconds: null,
      core_hours: null,
      wall_seconds: null,
      summary: "no completed run of this case with icoFoam yet: an estimate follows the first ones",
    },
    quota: {
      per_run: { cores: 1, memory_gb: 1, nodes: 1 },
      total: { cores: 3, memory_gb: 3, nodes: 3 },
      limits: { cores: 4, memory_gb: 8, nodes: 4, runs: 4, queued_runs: 100, storage_gb: 50 },
      in_use: { ...amounts, storage_gb: 12.5 },
      concurrent_runs: 3,
      waves: 1,
      fits: true,
      storage_full: false,
      problem: null,
      summary: "",
      ...quota,
    },
  } as Preview;
}

function show(p: Preview) {
  renderWithApp(<PreviewPanel preview={p} error={null} loading={false} localProblems={0} />);
}

describe("PreviewPanel: storage", () => {
  it("shows what the tenant stores against its storage quota beside cores and memory", () => {
    show(preview({}));
    const line = screen.getByTestId("preview-storage");
    expect(line).toHaveTextContent("12.5 GB stored · limit 50 GB");
    expect(line).not.toHaveTextContent("full");
    expect(screen.getByTestId("quota-impact")).toHaveTextContent("3 runs × 1 core: all at once");
  });

  it("says a study cannot be submitted while storage is full, and why", () => {
    const problem =
      "your tenant's storage quota (storage_gb) of 0.05 GB is used up (0.21 GB stored: case " +
      "uploads, result archives and run directories): delete studies or uploads you no longer " +
      "need, or ask an admin to raise it; the study can be saved as a draft meanwhile";
    show(
      preview({
        limits: { cores: 4, memory_gb: 8, nodes: 4, runs: 4, queued_runs: 100, storage_gb: 0.05 },
        in_use: { ...amounts, storage_gb: 0.213 },
        fits: false,
        storage_full: true,
        problem,
        summary: problem,
      }),
    );
    expect(screen.getByTestId("preview-storage")).toHaveTextContent(
      "0.213 GB stored · limit 0.05 GB · full",
    );
    expect(screen.getByTestId("quota-impact")).toHaveTextContent(
      "3 runs × 1 core: your storage quota is used up; save it as a draft for now",
    );
    expect(screen.getByText(problem)).toBeInTheDocument();
  });
});

describe("PreviewPanel: estimated cost", () => {
  it("says what the study will cost, from earlier runs of the case", () => {
    const summary =
      "about 0.083–0.17 core-hours and 90 s–3 min at 2 at a time, from 3 earlier runs of this case with icoFoam";
    show({
      ...preview({}),
      estimate: {
        based_on: 3,
        runs: 5,
        run_core_hours: [0.0167, 0.0333],
        run_wall_seconds: [30, 60],
        core_hours: [0.083, 0.167],
        wall_seconds: [90, 180],
        summary,
      },
    });
    expect(screen.getByTestId("preview-estimate")).toHaveTextContent(`Estimated cost: ${summary}.`);
  });
});

describe("PreviewPanel: counts in words", () => {
  it("says 1 core and 1 run, not 1 cores", () => {
    show({
      ...preview({ total: { cores: 1, memory_gb: 2, nodes: 1 }, concurrent_runs: 1 }),
      run_count: 1,
    });
    expect(screen.getByTestId("quota-impact")).toHaveTextContent("1 run × 1 core: all at once");
    expect(screen.getByText(/^Whole study:/)).toHaveTextContent(/^Whole study: 1 core and 2 GB/);
  });
});
