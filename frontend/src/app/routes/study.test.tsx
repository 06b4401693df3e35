import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { Route, Routes } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { StudyPage } from "./study";

afterEach(() => vi.restoreAllMocks());

const progress = {
  total: 10,
  completed: 10,
  failed: 0,
  cancelled: 0,
  cancelling: 0,
  active: 0,
  done: 10,
  percent: 100,
  by_state: { completed: 10 },
};

/** A finished study of a wing: its lift to drag, drag and lift over the angle of attack. */
function study(spec: object, completed = 10) {
  return {
    id: "s1",
    name: "wing",
    description: "",
    state: "completed",
    template: "airfoil",
    case: null,
    solver: "simpleFoam",
    backend: "local",
    owner: "alice",
    created_at: "2026-01-01T10:00:00Z",
    submitted_at: "2026-01-01T10:00:00Z",
    finished_at: "2026-01-01T11:00:00Z",
    resources: { processes: 1, memory_gb: 1 },
    core_hours: 1,
    estimate: null,
    run_count: 10,
    progress: { ...progress, completed, by_state: { completed } },
    objectives: {
      LD: { expr: "Cl / Cd" },
      Cd: { series: "forceCoeffs.Cd" },
      Cl: { series: "forceCoeffs.Cl" },
    },
    spec: {
      name: "wing",
      parameters: { aoa: { min: -4, max: 12 } },
      ...spec,
    },
  };
}

const FRONT = {
  objectives: [
    { name: "LD", direction: "max" },
    { name: "Cd", direction: "min" },
  ],
  constraints: [],
  completed: 10,
  missing: 0,
  feasible: 10,
  front_size: 1,
  hypervolume: 0,
  hypervolume_share: 0,
  reference: null,
  history: [],
  progress: null,
  runs: [
    {
      id: "r1",
      index: 0,
      batch: null,
      values: { LD: 10, Cd: 0.02 },
      feasible: true,
      front: true,
    },
  ],
};

/** The study page of `body`, every other view of it answered with nothing much. */
function renderStudy(body: object) {
  const api = mockApi({
    "GET /api/v1/studies/s1/": () => body,
    "GET /api/v1/studies/s1/pareto/": () => FRONT,
    "GET /api/v1/studies/s1/runs/": () => ({ count: 0, results: [] }),
    "GET /api/v1/studies/s1/plot/": () => ({ mode: "points", total: 0, points: null }),
    "GET /api/v1/studies/s1/surrogate/": { status: 400, body: { code: "x", message: "none" } },
  });
  renderWithApp(
    <Routes>
      <Route path="/studies/:id" element={<StudyPage />} />
    </Routes>,
    { route: "/studies/s1" },
  );
  return api;
}

const pareto = (calls: { url: URL }[]) =>
  calls.filter((c) => c.url.pathname === "/api/v1/studies/s1/pareto/");

describe("StudyPage's Pareto front", () => {
  it("is open on an adaptive study after the trade-off of its objectives", async () => {
    const { calls } = renderStudy(
      study({
        combine: "adaptive",
        adaptive: { budget: 10, goal: "pareto", objectives: ["LD", "Cd"] },
      }),
    );
    const toggle = await screen.findByTestId("pareto-toggle");
    expect(toggle).toHaveAttribute("aria-expanded", "true");
    expect(await screen.findByRole("figure", { name: "Pareto front of LD and Cd" })).toBeVisible();
    // its own objectives: none to pick, none asked for
    expect(screen.queryByTestId("pareto-objectives")).toBeNull();
    expect(pareto(calls)[0]?.url.searchParams.get("objectives")).toBeNull();
  });

  it("is closed on a sweep until opened, then asks for two objectives picked", async () => {
    const { calls } = renderStudy(study({ combine: "grid" }));
    const toggle = await screen.findByTestId("pareto-toggle");
    expect(toggle).toHaveAttribute("aria-expanded", "false");
    expect(pareto(calls)).toHaveLength(0);
    await userEvent.click(toggle);
    expect(await screen.findByRole("figure", { name: "Pareto front of LD and Cd" })).toBeVisible();
    await waitFor(() =>
      expect(pareto(calls)[0]?.url.searchParams.get("objectives")).toBe("LD:max,Cd:max"),
    );
  });

  it("is not offered before a run completes", async () => {
    renderStudy(study({ combine: "grid" }, 0));
    await screen.findByRole("heading", { name: "Runs" });
    expect(screen.queryByTestId("pareto-toggle")).toBeNull();
  });
});
