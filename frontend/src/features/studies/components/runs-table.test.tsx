import { act, screen, waitFor, within } from "@testing-library/react";
import { userEvent } from "@testing-library/user-event";
import { useMemo } from "react";
import { useLocation, useSearchParams } from "react-router";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Run } from "@/lib/types";
import { type FakeSocket, stubWebSockets } from "@/test/fake-socket";
import { mockApi, renderWithApp } from "@/test/render";
import {
  REFETCH_DEBOUNCE_MS,
  useRunSelectionInUrl,
  useStudyRunsPage,
} from "../hooks/use-runs-table";
import { runQueryFromSearch, runQueryToSearch } from "../lib/run-query";
import { RunsTable } from "./runs-table";

let sockets: FakeSocket[] = [];

/**
 * The server: `total` runs of which the first `completed` are done, answering a page of what
 * the request asks (filters are the server's job). Tests that do not page keep it small:
 * every row shown is rendered.
 */
function server({ total = 250, completed = 100 }: { total?: number; completed?: number } = {}) {
  const db: Run[] = Array.from(
    { length: total },
    (_, i) =>
      ({
        id: `r${i}`,
        study: "s1",
        index: i,
        parameters: { aoa: i % 10 },
        objectives: i < completed ? { Cl: i / 100 } : {},
        state: i < completed ? "completed" : "pending",
        trust: i < completed ? "converged" : "",
        queue_position: null,
        started_at: null,
        peak_memory_bytes: i === 0 ? 104_857_600 : null,
        core_hours: i === 0 ? 0.0123 : null,
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
  const counts = { completed, pending: total - completed };
  return { db, counts, ...api };
}

function Location() {
  const location = useLocation();
  return <output data-testid="location">{location.search}</output>;
}

/** The study page's wiring of the table: the query in the URL, the page from the server. */
function StudyRuns({
  active = false,
  counts = { completed: 100, pending: 150 },
}: {
  active?: boolean;
  counts?: Record<string, number>;
}) {
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
        counts={counts}
        selected={new Set()}
        onToggleSelect={() => {}}
      />
      <Location />
      <output data-testid="fetching">{runs.isFetching ? "yes" : "no"}</output>
    </>
  );
}

/** The study page's selection: ticks kept in the URL, a page ticked at once. */
function SelectableRuns() {
  const [params, setParams] = useSearchParams();
  const query = useMemo(() => runQueryFromSearch(params), [params]);
  const runs = useStudyRunsPage("s1", query, { active: false });
  const selection = useRunSelectionInUrl();
  return (
    <>
      <RunsTable
        page={runs.data}
        query={query}
        onQueryChange={(patch) => setParams((p) => runQueryToSearch(p, patch))}
        parameters={["aoa"]}
        objectives={["Cl"]}
        selected={selection.selected}
        onToggleSelect={selection.toggle}
        onSelectPage={selection.selectPage}
        maxSelected={1000}
      />
      <output data-testid="selection">{selection.ids.join(",")}</output>
    </>
  );
}

const last = (calls: { url: URL }[]) => calls[calls.length - 1]!.url.searchParams;

/**
 * The page's timers (the debounce of live changes, the safety-net polling) run on a fake clock
 * that moves only when a test waits, so what a test sees never depends on how fast the
 * machine renders. Testing Library advances the clock while it waits once it sees Jest's
 * timer API.
 */
let user: ReturnType<typeof userEvent.setup>;
beforeEach(() => {
  sockets = stubWebSockets();
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
  vi.stubGlobal("jest", { advanceTimersByTime: (ms: number) => vi.advanceTimersByTime(ms) });
  user = userEvent.setup({ advanceTimers: (ms) => vi.advanceTimersByTime(ms) });
});
afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
});

// rendering a full page of 100 rows in jsdom takes seconds on a busy machine: the tests
// leave it the time it needs (nothing here measures time; the page's clock is the fake one)
describe("RunsTable (server-side)", { timeout: 60_000 }, () => {
  it("loads one page of 100 rows of the study's runs", async () => {
    const { calls } = server();
    renderWithApp(<StudyRuns />);
    await screen.findByTestId("run-row-0");
    expect(screen.getByRole("table", { name: "Runs" })).toHaveAttribute("aria-rowcount", "250");
    expect(within(screen.getByTestId("runs-table")).getAllByRole("row")).toHaveLength(101);
    expect(last(calls).get("page_size")).toBe("100");
    expect(last(calls).get("ordering")).toBeNull();
  });

  it("shows each run's peak memory and core-hours once it has them", async () => {
    server({ total: 3, completed: 3 });
    renderWithApp(<StudyRuns />);
    const first = await screen.findByTestId("run-row-0");
    expect(first).toHaveTextContent("105 MB");
    expect(first).toHaveTextContent("0.012");
    expect(screen.getByTestId("run-row-1")).not.toHaveTextContent("MB");
  });

  it("sorts on the server by a header click", async () => {
    const { calls, counts } = server({ total: 20, completed: 10 });
    renderWithApp(<StudyRuns counts={counts} />);
    await screen.findByTestId("run-row-0");
    await user.click(screen.getByRole("columnheader", { name: "Cl" }));
    await waitFor(() => expect(last(calls).get("ordering")).toBe("objective.Cl"));
    await user.click(screen.getByRole("columnheader", { name: "Cl" }));
    await waitFor(() => expect(last(calls).get("ordering")).toBe("-objective.Cl"));
    expect(screen.getByRole("columnheader", { name: "Cl" })).toHaveAttribute(
      "aria-sort",
      "descending",
    );
    expect(screen.getByTestId("location")).toHaveTextContent("sort=-objective.Cl");
  });

  it("sends the state, trust and range filters as the API's query parameters", async () => {
    const { calls, counts } = server({ total: 110, completed: 10 });
    renderWithApp(<StudyRuns counts={counts} />, { route: "/?page=2" });
    await screen.findByTestId("run-row-100");

    await user.click(screen.getByRole("checkbox", { name: "Completed 10" }));
    await waitFor(() => expect(last(calls).getAll("state")).toEqual(["completed"]));
    expect(last(calls).get("page")).toBeNull(); // a new filter starts at page 1
    await user.click(screen.getByRole("checkbox", { name: "Converged" }));
    await waitFor(() => expect(last(calls).getAll("trust")).toEqual(["converged"]));

    await user.type(screen.getByRole("textbox", { name: "min" }), "2");
    await user.type(screen.getByRole("textbox", { name: "max" }), "8");
    await user.click(screen.getByRole("button", { name: "Filter" }));
    await waitFor(() => expect(last(calls).getAll("param")).toEqual(["aoa:2..8"]));
    expect(screen.getByTestId("location")).toHaveTextContent("range=param.aoa%3A2..8");

    await user.click(screen.getByRole("button", { name: "Remove the filter 2 ≤ aoa ≤ 8" }));
    await waitFor(() => expect(screen.queryByTestId("range-filters")).not.toBeInTheDocument());
    expect(screen.getByTestId("location")).not.toHaveTextContent("range=");
    expect(screen.getByTestId("location")).toHaveTextContent("state=completed");
  });

  it("pages through the runs", async () => {
    const { calls, counts } = server({ total: 210 });
    renderWithApp(<StudyRuns counts={counts} />);
    await screen.findByTestId("run-row-0");
    expect(screen.getByTestId("runs-range")).toHaveTextContent("1–100 of 210 runs");
    await user.click(screen.getByRole("button", { name: "3" }));
    await screen.findByTestId("run-row-200");
    expect(last(calls).get("page")).toBe("3");
    expect(screen.getByTestId("runs-range")).toHaveTextContent("201–210 of 210 runs");
    expect(screen.queryByTestId("run-row-0")).not.toBeInTheDocument();
  });

  it("updates a shown row from a live event in place, and refetches when counts change under a state filter", async () => {
    const { calls, db, counts } = server({ total: 130 });
    renderWithApp(<StudyRuns active counts={counts} />, { route: "/?state=pending" });
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
        progress: { completed: 100, running: 1, pending: 29 },
      }),
    );
    // in place, without a request
    await waitFor(() =>
      expect(screen.getByTestId("run-row-100")).toHaveAttribute("data-state", "running"),
    );
    expect(calls.length).toBe(before);
    // nor while more changes may follow
    await act(() => vi.advanceTimersByTimeAsync(REFETCH_DEBOUNCE_MS / 2));
    expect(calls.length).toBe(before);
    // then the page is asked for again (it filters by state): run 100 leaves it
    await waitFor(() => expect(screen.queryByTestId("run-row-100")).not.toBeInTheDocument(), {
      timeout: REFETCH_DEBOUNCE_MS * 2,
    });
    expect(calls.length).toBe(before + 1);
    expect(last(calls).getAll("state")).toEqual(["pending"]);
  });

  it("leaves an unfiltered page alone when only states change", async () => {
    const { calls, counts } = server({ total: 20, completed: 10 });
    renderWithApp(<StudyRuns active counts={counts} />);
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
        progress: { completed: 9, failed: 1, pending: 10 },
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
    const { calls, db, counts } = server({ total: 110 });
    db[100] = {
      ...db[100]!,
      state: "running",
      started_at: "2026-01-01T10:00:00Z",
    } as unknown as Run;
    renderWithApp(<StudyRuns active counts={counts} />, { route: "/?page=2" });
    await screen.findByTestId("run-row-100");
    await waitFor(() => expect(sockets).toHaveLength(1));
    const socket = sockets[0]!;
    act(() => socket.push({ type: "subscribed", id: "s1", seq: 1 }));
    // the page read again on subscribing (it may predate the stream), and settled
    await waitFor(() => expect(calls.length).toBe(2));
    await waitFor(() => expect(screen.getByTestId("fetching")).toHaveTextContent("no"));
    const before = calls.length;
    // the event carries the timestamps, not wall_seconds (the REST row has it)
    act(() =>
      socket.push({
        type: "runs",
        id: "s1",
        seq: 2,
        runs: [{ id: "r100", state: "completed", finished_at: "2026-01-01T10:02:05Z" }],
        progress: { completed: 101, pending: 9 },
      }),
    );
    await waitFor(() =>
      expect(screen.getByTestId("run-row-100")).toHaveAttribute("data-state", "completed"),
    );
    expect(within(screen.getByTestId("run-row-100")).getByText("2 min 5 s")).toBeInTheDocument();
    expect(calls.length).toBe(before);
  });

  it("reads the page once more when the study ends, for a last event it may have missed", async () => {
    const { calls, db, counts } = server({ total: 110 });
    db[100] = { ...db[100]!, state: "running" } as unknown as Run;
    const { rerender } = renderWithApp(<StudyRuns active counts={counts} />, {
      route: "/?page=2",
    });
    await screen.findByTestId("run-row-100");
    expect(screen.getByTestId("run-row-100")).toHaveAttribute("data-state", "running");
    await waitFor(() => expect(screen.getByTestId("fetching")).toHaveTextContent("no"));
    // the run ended and so did the study, but its event never reached this page
    db[100] = { ...db[100]!, state: "completed" } as unknown as Run;
    const before = calls.length;
    rerender(<StudyRuns active={false} counts={counts} />);
    await waitFor(() =>
      expect(screen.getByTestId("run-row-100")).toHaveAttribute("data-state", "completed"),
    );
    expect(calls.length).toBe(before + 1);
  });
});

describe("RunsTable selection", () => {
  it("ticks every run of the page at once, shows a page partly ticked as mixed, and unticks it", async () => {
    server({ total: 4, completed: 2 });
    renderWithApp(<SelectableRuns />);
    await screen.findByTestId("run-row-3");
    const page = screen.getByRole("checkbox", { name: "Select all runs on this page" });
    await user.click(screen.getByRole("checkbox", { name: "Select run 2" }));
    await waitFor(() => expect(screen.getByTestId("selection")).toHaveTextContent("r2"));
    expect(page).not.toBeChecked();
    expect(page).toHaveAttribute("data-indeterminate", "true");

    await user.click(page);
    await waitFor(() => expect(screen.getByTestId("selection")).toHaveTextContent("r2,r0,r1,r3"));
    expect(screen.getByRole("checkbox", { name: "Select run 0" })).toBeChecked();
    expect(page).toBeChecked();

    await user.click(page);
    await waitFor(() => expect(screen.getByTestId("selection")).toBeEmptyDOMElement());
    expect(screen.getByRole("checkbox", { name: "Select run 2" })).not.toBeChecked();
  });
});
