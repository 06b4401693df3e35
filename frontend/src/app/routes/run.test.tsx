import { screen, waitFor } from "@testing-library/react";
import { Route, Routes } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { RunPage } from "./run";

afterEach(() => vi.restoreAllMocks());

const run = {
  id: "r1",
  study: "s1",
  study_name: "sweep",
  index: 3,
  parameters: { aoa: 4 },
  objectives: {},
  state: "completed",
  trust: "converged",
  trust_detail: null,
  backend: "local",
  processes: 1,
  memory_gb: 1,
  attempt: 1,
  end_reason: "success",
  queued_at: "2026-01-01T10:00:00Z",
  started_at: "2026-01-01T10:00:00Z",
  finished_at: "2026-01-01T10:01:30Z",
  wall_seconds: 90,
  iterations: 200,
  cpu_percent: 0,
  rss_bytes: 143_000,
  peak_memory_bytes: 120_000_000,
  cpu_seconds: 84.2,
  core_hours: 0.025,
  archive_available: true,
  last_seq: 4,
  continuation: { writes: ["100", "200"], problem: "", resumed_from: null },
};

function renderRun(body: object) {
  return mockApi({
    "GET /api/v1/runs/r1/": () => body,
    "GET /api/v1/studies/s1/": () => ({
      id: "s1",
      name: "sweep",
      objectives: {},
      spec: { name: "x" },
    }),
    "GET /api/v1/runs/r1/telemetry/": () => ({ available: [], series: {}, last_seq: 4 }),
    "GET /api/v1/runs/r1/log/": () => ({ lines: [] }),
  });
}

function renderPage() {
  renderWithApp(
    <Routes>
      <Route path="/runs/:id" element={<RunPage />} />
    </Routes>,
    { route: "/runs/r1" },
  );
}

describe("RunPage", () => {
  it("asks for its study only once it knows which (never /studies//)", async () => {
    const { calls } = mockApi({
      "GET /api/v1/runs/r1/": () => run,
      "GET /api/v1/studies/s1/": () => ({
        id: "s1",
        name: "sweep",
        objectives: {},
        spec: { name: "x" },
      }),
      "GET /api/v1/runs/r1/telemetry/": () => ({ available: [], series: {}, last_seq: 4 }),
      "GET /api/v1/runs/r1/log/": () => ({ lines: [] }),
    });
    renderWithApp(
      <Routes>
        <Route path="/runs/:id" element={<RunPage />} />
      </Routes>,
      { route: "/runs/r1" },
    );
    await screen.findByRole("heading", { name: "Run 3" });
    await waitFor(() => expect(calls.map((c) => c.url.pathname)).toContain("/api/v1/studies/s1/"));
    expect(calls.map((c) => c.url.pathname)).not.toContain("/api/v1/studies//");
    expect(screen.getByTestId("run-wall")).toHaveTextContent("1 min 30 s");
  });

  it("shows a finished run's peak memory, CPU time and core-hours, not its last sample", async () => {
    renderRun(run);
    renderPage();
    await screen.findByRole("heading", { name: "Run 3" });
    expect(screen.getByTestId("run-peak-memory")).toHaveTextContent("120 MB");
    expect(screen.getByTestId("run-cpu-time")).toHaveTextContent("1 min 24 s");
    expect(screen.getByTestId("run-core-hours")).toHaveTextContent("0.025 core-h");
    expect(screen.queryByTestId("run-cpu")).not.toBeInTheDocument();
    expect(screen.queryByText("143 kB")).not.toBeInTheDocument();
  });

  it("shows a running run's last sample as what it uses now", async () => {
    renderRun({
      ...run,
      state: "running",
      end_reason: "",
      finished_at: null,
      wall_seconds: null,
      cpu_percent: 97.5,
      rss_bytes: 300_000_000,
      peak_memory_bytes: null,
      cpu_seconds: null,
    });
    renderPage();
    expect(await screen.findByTestId("run-cpu")).toHaveTextContent("98 %");
    expect(screen.getByTestId("run-memory")).toHaveTextContent("300 MB");
    expect(screen.queryByTestId("run-peak-memory")).not.toBeInTheDocument();
    expect(screen.queryByTestId("rerun")).not.toBeInTheDocument();
  });

  it("says how to rerun a finished run by hand, in the order its agent ran the commands", async () => {
    renderRun({
      ...run,
      provenance: {
        openfoam_version: "2406",
        image: null,
        rerun: [
          "export WM_PROJECT_DIR=/usr/share/openfoam",
          "blockMesh > log.blockMesh 2>&1",
          "icoFoam > log.icoFoam 2>&1",
        ],
        commands: [],
        planned_commands: [],
        packages: {},
        hosts: [],
        identity: { hash: "h" },
        environment: {},
        backend: { name: "local", kind: "local" },
      },
    });
    renderPage();
    const script = await screen.findByTestId("rerun-script");
    expect(script.textContent).toBe(
      [
        "mkdir run-3 && tar -xzf run-3.tar.gz -C run-3 && cd run-3",
        "export WM_PROJECT_DIR=/usr/share/openfoam",
        "blockMesh > log.blockMesh 2>&1",
        "icoFoam > log.icoFoam 2>&1",
      ].join("\n"),
    );
    expect(screen.getByTestId("rerun")).toHaveTextContent("OpenFOAM 2406");
    expect(screen.getByRole("link", { name: "Download the archive" })).toHaveAttribute(
      "href",
      expect.stringContaining("/api/v1/runs/r1/archive/"),
    );
  });

  it("says which write the run went on from, what changed and who asked, and offers to go on again", async () => {
    renderRun({
      ...run,
      attempt: 2,
      continuation: {
        writes: ["100", "200", "300"],
        problem: "",
        resumed_from: {
          attempt: 1,
          time: "200",
          iterations: 100,
          settings: { fvSolution: { "relaxationFactors.equations.U": "0.5" } },
          by: "ada",
          at: "2026-01-01T10:05:00Z",
        },
      },
    });
    renderPage();
    expect(await screen.findByTestId("resumed-from")).toHaveTextContent(
      "Went on from time 200 of attempt 1 (+100 iterations; changed: fvSolution relaxationFactors.equations.U = 0.5) — by ada",
    );
    expect(screen.getByRole("button", { name: "Continue…" })).not.toHaveAttribute("aria-disabled");
  });
});
