import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { Route, Routes } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { RunsPage } from "./runs";

afterEach(() => vi.restoreAllMocks());

const run = (i: number, study: string, name: string, state = "running") => ({
  id: `r-${study}-${i}`,
  study,
  study_name: name,
  index: i,
  parameters: { aoa: i },
  objectives: {},
  state,
  trust: "",
  backend: "slurm",
  queue_position: null,
  queued_at: "2026-01-01T00:00:00Z",
  started_at: null,
});

describe("RunsPage", () => {
  it("lists the runs across studies with the URL's filters, a study column, and filters by study", async () => {
    const { calls } = mockApi({
      "GET /api/v1/runs/": (url) => ({
        count: 2,
        next: null,
        previous: null,
        results: url.searchParams.get("study")
          ? [run(0, "s2", "sweep B")]
          : [run(0, "s1", "sweep A"), run(3, "s2", "sweep B", "pending")],
      }),
      "GET /api/v1/studies/": {
        status: 200,
        body: {
          count: 2,
          results: [
            {
              id: "s1",
              name: "sweep A",
              spec: { name: "sweep A", parameters: {} },
              objectives: {},
            },
            {
              id: "s2",
              name: "sweep B",
              spec: { name: "sweep B", parameters: { aoa: { values: [0, 3] } } },
              objectives: { Cl: {} },
            },
          ],
        },
      },
      "GET /api/v1/backends/": { status: 200, body: [{ name: "slurm" }, { name: "local" }] },
    });
    renderWithApp(
      <Routes>
        <Route path="/runs" element={<RunsPage />} />
      </Routes>,
      { route: "/runs?state=pending,admitted,provisioning,running&backend=slurm" },
    );
    const rows = await screen.findAllByTestId("run-row");
    expect(rows).toHaveLength(2);
    expect(within(rows[0]!).getByRole("link", { name: "sweep A" })).toHaveAttribute(
      "href",
      "/studies/s1",
    );
    const first = calls.find((c) => c.url.pathname === "/api/v1/runs/")!.url.searchParams;
    expect(first.getAll("state")).toEqual(["pending", "admitted", "provisioning", "running"]);
    expect(first.get("backend")).toBe("slurm");
    expect(first.get("page_size")).toBe("100");
    // the active states are preselected as chips
    expect(screen.getByRole("checkbox", { name: "Running" })).toBeChecked();
    expect(screen.getByRole("checkbox", { name: "Completed" })).not.toBeChecked();

    await userEvent.click(screen.getByRole("textbox", { name: "Study" }));
    await userEvent.type(screen.getByRole("textbox", { name: "Study" }), "sweep B");
    // the dropdown is still in its opening transition in jsdom: hidden to the a11y tree
    fireEvent.click(await screen.findByRole("option", { name: "sweep B", hidden: true }));
    await waitFor(() => {
      const last = calls.filter((c) => c.url.pathname === "/api/v1/runs/").at(-1)!;
      expect(last.url.searchParams.get("study")).toBe("s2");
    });
    // one study chosen: its parameters and objectives become columns (and sort keys)
    expect(await screen.findByRole("columnheader", { name: "Cl" })).toBeInTheDocument();
    expect(screen.getByRole("columnheader", { name: "aoa" })).toBeInTheDocument();
  });
});
