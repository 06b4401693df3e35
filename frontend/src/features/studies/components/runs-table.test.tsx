import { act, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { useMemo } from "react";
import { useLocation, useSearchParams } from "react-router";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Run } from "@/lib/types";
import { mockApi, renderWithApp } from "@/test/render";
import { useStudyRunsPage } from "../hooks/use-runs-table";
import { runQueryFromSearch, runQueryToSearch } from "../lib/run-query";
import { RunsTable } from "./runs-table";

const sockets: FakeSocket[] = [];
class FakeSocket {
  onopen: (() => void) | null = null;
  onmessage: ((e: { data: string }) => void) | null = null;
  onclose: ((e: { code: number }) => void) | null = null;
  constructor(readonly url: string) {
    sockets.push(this);
  }
  close() {}
  push(message: object) {
    this.onmessage?.({ data: JSON.stringify(message) });
  }
}

/** The server: 250 runs, a page of what the request asks (filters are the server's job). */
function server(total = 250) {
  const db: Run[] = Array.from(
    { length: total },
    (_, i) =>
      ({
        id: `r${i}`,
        study: "s1",
        index: i,
        parameters: { aoa: i % 10 },
        objectives: i < 100 ? { Cl: i / 100 } : {},
        state: i < 100 ? "completed" : "pending",
        trust: i < 100 ? "converged" : "",
        queue_position: null,
        started_at: null,
      }) as unknown as Run,
  );
  const api = mockApi({
    "GET /api/v1/studies/s1/runs/": (url) => {
      const page = Number(url.searchParams.get("page") ?? 1);
      const size = Number(url.searchParams.get("page_size"));
      const states = url.searchParams.getAll("state");
      const rows = states.length ? db.filter((r) => states.includes(r.state ?? "")) : db;
      return {
        count: rows.length,
        next: null,
        previous: null,
        results: rows.slice((page - 1) * size, page * size),
      };
    },
  });
  return { db, ...api };
}

function Location() {
  const location = useLocation();
  return <output data-testid="location">{location.search}</output>;
}

/** The study page's wiring of the table: the query in the URL, the page from the server. */
function StudyRuns({ active = false }: { active?: boolean }) {
  const [params, setParams] = useSearchParams();
  const query = useMemo(() => runQueryFromSearch(params), [params]);
  const runs = useStudyRunsPage("s1", query, { active });
  return (
    <>
      <RunsTable
        page={runs.data}
        query={query}
        onQueryChange={(patch) => setParams((p) => runQueryToSearch(p, patch))}
        parameters={["aoa"]}
        objectives={["Cl"]}
        counts={{ completed: 100, pending: 150 }}
        selected={new Set()}
        onToggleSelect={() => {}}
      />
      <Location />
      <output data-testid="fetching">{runs.isFetching ? "yes" : "no"}</output>
    </>
  );
}

const last = (calls: { url: URL }[]) => calls[calls.length - 1]!.url.searchParams;

beforeEach(() => {
  sockets.length = 0;
  vi.stubGlobal("WebSocket", FakeSocket);
});
afterEach(() => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
});

describe("RunsTable (server-side)", () => {
  it("loads one page of 100 rows and sorts on the server by a header click", async () => {
    const { calls } = server();
    renderWithApp(<StudyRuns />);
    await screen.findByTestId("run-row-0");
    expect(screen.getByRole("table", { name: "Runs" })).toHaveAttribute("aria-rowcount", "250");
    expect(within(screen.getByTestId("runs-table")).getAllByRole("row")).toHaveLength(101);
    expect(last(calls).get("page_size")).toBe("100");
    expect(last(calls).get("ordering")).toBeNull();

    await userEvent.click(screen.getByRole("columnheader", { name: "Cl" }));
    await waitFor(() => expect(last(calls).get("ordering")).toBe("objective.Cl"));
    await userEvent.click(screen.getByRole("columnheader", { name: "Cl" }));
    await waitFor(() => expect(last(calls).get("ordering")).toBe("-objective.Cl"));
    expect(screen.getByRole("columnheader", { name: "Cl" })).toHaveAttribute(
      "aria-sort",
      "descending",
    );
    expect(screen.getByTestId("location")).toHaveTextContent("sort=-objective.Cl");
  });

  it("sends the state, trust and range filters as the API's query parameters", async () => {
    const { calls } = server();
    renderWithApp(<StudyRuns />, { route: "/?page=2" });
    await screen.findByTestId("run-row-100");

    await userEvent.click(screen.getByRole("checkbox", { name: "Completed 100" }));
    await waitFor(() => expect(last(calls).getAll("state")).toEqual(["completed"]));
    expect(last(calls).get("page")).toBeNull(); // a new filter starts at page 1
    await userEvent.click(screen.getByRole("checkbox", { name: "Converged" }));
    await waitFor(() => expect(last(calls).getAll("trust")).toEqual(["converged"]));

    await userEvent.type(screen.getByRole("textbox", { name: "min" }), "2");
    await userEvent.type(screen.getByRole("textbox", { name: "max" }), "8");
    await userEvent.click(screen.getByRole("button", { name: "Filter" }));
    await waitFor(() => expect(last(calls).getAll("param")).toEqual(["aoa:2..8"]));
    expect(screen.getByTestId("location")).toHaveTextContent("range=param.aoa%3A2..8");

    await userEvent.click(screen.getByRole("button", { name: "Remove the filter 2 ≤ aoa ≤ 8" }));
    await waitFor(() => expect(screen.queryByTestId("range-filters")).not.toBeInTheDocument());
    expect(screen.getByTestId("location")).not.toHaveTextContent("range=");
    expect(screen.getByTestId("location")).toHaveTextContent("state=completed");
  });

  it("pages through the runs", async () => {
    const { calls } = server();
    renderWithApp(<StudyRuns />);
    await screen.findByTestId("run-row-0");
    expect(screen.getByTestId("runs-range")).toHaveTextContent("1–100 of 250 runs");
    await userEvent.click(screen.getByRole("button", { name: "3" }));
    await screen.findByTestId("run-row-200");
    expect(last(calls).get("page")).toBe("3");
    expect(screen.getByTestId("runs-range")).toHaveTextContent("201–250 of 250 runs");
    expect(screen.queryByTestId("run-row-0")).not.toBeInTheDocument();
  });

  it("updates a shown row from a live event in place, and refetches when counts change under a state filter", async () => {
    const { calls, db } = server();
    renderWithApp(<StudyRuns active />, { route: "/?state=pending" });
    await screen.findByTestId("run-row-100");
    await waitFor(() =>
      expect(sockets.map((s) => s.url)).toContain("ws://localhost:3000/ws/studies/s1/"),
    );
    const socket = sockets[0]!;
    act(() => socket.push({ type: "subscribed", id: "s1", seq: 1 }));
    await waitFor(() => expect(calls.length).toBe(2));
    await waitFor(() => expect(screen.getByTestId("fetching")).toHaveTextContent("no"));
    const before = calls.length;

    // run 100 starts: the server's data changes, the event carries the row and new counts
    db[100] = { ...db[100]!, state: "running" };
    act(() =>
      socket.push({
        type: "runs",
        id: "s1",
        seq: 2,
        runs: [{ id: "r100", state: "running" }],
        progress: { completed: 100, running: 1, pending: 149 },
      }),
    );
    // in place, without a request
    await waitFor(() =>
      expect(screen.getByTestId("run-row-100")).toHaveAttribute("data-state", "running"),
    );
    expect(calls.length).toBe(before);
    // then the page is asked for again (it filters by state): run 100 leaves it
    await waitFor(() => expect(screen.queryByTestId("run-row-100")).not.toBeInTheDocument(), {
      timeout: 4000,
    });
    expect(calls.length).toBe(before + 1);
    expect(last(calls).getAll("state")).toEqual(["pending"]);
  });

  it("leaves an unfiltered page alone when only states change", async () => {
    const { calls } = server();
    renderWithApp(<StudyRuns active />);
    await screen.findByTestId("run-row-0");
    await waitFor(() => expect(sockets).toHaveLength(1));
    const socket = sockets[0]!;
    act(() => socket.push({ type: "subscribed", id: "s1", seq: 1 }));
    await waitFor(() => expect(calls.length).toBe(2));
    await waitFor(() => expect(screen.getByTestId("fetching")).toHaveTextContent("no"));
    act(() =>
      socket.push({
        type: "runs",
        id: "s1",
        seq: 2,
        runs: [{ id: "r5", state: "failed", trust: "diverged" }],
        progress: { completed: 99, failed: 1, pending: 150 },
      }),
    );
    await waitFor(() =>
      expect(screen.getByTestId("run-row-5")).toHaveAttribute("data-state", "failed"),
    );
    expect(within(screen.getByTestId("run-row-5")).getByText("Diverged")).toBeInTheDocument();
    expect(calls.length).toBe(2);
    // a gap in seq (a lost message) refetches at once
    act(() => socket.push({ type: "runs", id: "s1", seq: 9, runs: [] }));
    await waitFor(() => expect(calls.length).toBe(3));
  });

  it("shows the wall time of a run that ends by a live event, without a reload", async () => {
    const { calls, db } = server();
    db[100] = {
      ...db[100]!,
      state: "running",
      started_at: "2026-01-01T10:00:00Z",
    } as unknown as Run;
    renderWithApp(<StudyRuns active />, { route: "/?page=2" });
    await screen.findByTestId("run-row-100");
    await waitFor(() => expect(sockets).toHaveLength(1));
    const socket = sockets[0]!;
    act(() => socket.push({ type: "subscribed", id: "s1", seq: 1 }));
    await waitFor(() => expect(screen.getByTestId("fetching")).toHaveTextContent("no"));
    const before = calls.length;
    // the event carries the timestamps, not wall_seconds (the REST row has it)
    act(() =>
      socket.push({
        type: "runs",
        id: "s1",
        seq: 2,
        runs: [{ id: "r100", state: "completed", finished_at: "2026-01-01T10:02:05Z" }],
        progress: { completed: 101, pending: 149 },
      }),
    );
    await waitFor(() =>
      expect(screen.getByTestId("run-row-100")).toHaveAttribute("data-state", "completed"),
    );
    expect(within(screen.getByTestId("run-row-100")).getByText("2 min 5 s")).toBeInTheDocument();
    expect(calls.length).toBe(before);
  });

  it("reads the page once more when the study ends, for a last event it may have missed", async () => {
    const { calls, db } = server();
    db[100] = { ...db[100]!, state: "running" } as unknown as Run;
    const { rerender } = renderWithApp(<StudyRuns active />, { route: "/?page=2" });
    await screen.findByTestId("run-row-100");
    expect(screen.getByTestId("run-row-100")).toHaveAttribute("data-state", "running");
    await waitFor(() => expect(screen.getByTestId("fetching")).toHaveTextContent("no"));
    // the run ended and so did the study, but its event never reached this page
    db[100] = { ...db[100]!, state: "completed" } as unknown as Run;
    const before = calls.length;
    rerender(<StudyRuns active={false} />);
    await waitFor(() =>
      expect(screen.getByTestId("run-row-100")).toHaveAttribute("data-state", "completed"),
    );
    expect(calls.length).toBe(before + 1);
  });
});
