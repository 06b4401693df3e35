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
  cpu_percent: 97.5,
  rss_bytes: 300 * 1024 * 1024,
  last_seq: 4,
};

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
    expect(screen.getByTestId("run-cpu")).toHaveTextContent("98 %");
  });
});
