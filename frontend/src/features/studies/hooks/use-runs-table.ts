import {
  keepPreviousData,
  useQueries,
  useQuery,
  useQueryClient,
  type UseQueryResult,
} from "@tanstack/react-query";
import { useDebouncedCallback } from "@mantine/hooks";
import { useCallback, useEffect, useMemo, useRef } from "react";
import { useSearchParams } from "react-router";
import { env } from "@/lib/env";
import { LIVE_SAFETY_POLL_MS, useLiveStream, type LiveMessage } from "@/lib/live";
import { isActiveRun, TERMINAL_RUN_STATES, type Run, type RunState } from "@/lib/types";
import {
  fetchRun,
  fetchRunsPage,
  fetchStudyPlot,
  fetchStudySurrogate,
  type Page,
  type PlotQuery,
  type SurrogateQuery,
} from "../api/studies";
import { runQueryFromSearch, runQueryToSearch, type RunQuery } from "../lib/run-query";
import { mergeRunEvents, studyKeys } from "./use-studies";

/** How long live changes gather before the page or the plot is asked for again. */
export const REFETCH_DEBOUNCE_MS = 1_500;

export const runsKeys = {
  all: ["runs", "page"] as const,
  page: (q: RunQuery) => ["runs", "page", q] as const,
};

/** What a handler of a study's stream is told besides the message. */
type StudyEventHandler = (m: LiveMessage, missed: boolean) => void;

/**
 * A study's live stream, open while `open`, with its seq followed: `handle` gets every
 * message and whether events may have been missed before it (a gap in seq, or the
 * `subscribed` message itself, since what was read before may predate the subscription).
 * Returns whether the stream is subscribed.
 */
function useStudyStream(id: string, open: boolean, handle: StudyEventHandler): boolean {
  const lastSeq = useRef<number | null>(null);
  const onMessage = useCallback(
    (m: LiveMessage) => {
      if (m.type === "subscribed") {
        lastSeq.current = m.seq;
        handle(m, true);
        return;
      }
      const missed = lastSeq.current !== null && m.seq !== lastSeq.current + 1;
      lastSeq.current = Math.max(lastSeq.current ?? 0, m.seq);
      handle(m, missed);
    },
    [handle],
  );
  return useLiveStream(open ? `/ws/studies/${id}/` : null, onMessage);
}

/** The runs table's query, kept in the page's URL, and how to change it (in place). */
export function useRunQueryInUrl(): [RunQuery, (patch: Partial<RunQuery>) => void] {
  const [params, setParams] = useSearchParams();
  const query = useMemo(() => runQueryFromSearch(params), [params]);
  const setQuery = useCallback(
    (patch: Partial<RunQuery>) => setParams((p) => runQueryToSearch(p, patch), { replace: true }),
    [setParams],
  );
  return [query, setQuery];
}

/** What the runs table shows of a page being loaded: the page, its error, whether it is stale. */
export function runsPageState(runs: UseQueryResult<Page<Run>>) {
  return {
    page: runs.data,
    error: runs.isError ? runs.error : undefined,
    onRetry: () => void runs.refetch(),
    fetching: runs.isPlaceholderData,
  };
}

/**
 * Whether runs changing state can change which runs a page shows (or their order): a state
 * or trust filter, an objective range, or a sort by anything but the index or a parameter.
 * Rows already on the page are updated in place either way.
 */
export function pageMayChange(q: RunQuery): boolean {
  if (q.state.length || q.trust.length) return true;
  if (q.ranges.some((r) => r.column.startsWith("objective."))) return true;
  return !!q.ordering && !/^-?(index|param\.[^,]+)$/.test(q.ordering);
}

/**
 * `reload` once when the study stops being active: its stream closes and polling stops then,
 * so what the page shows is read once more (an event of its last moments, or a view the
 * server computed after the last run ended, may have been missed, and nothing would correct
 * it after).
 */
function useWhenEnded(active: boolean, reload: () => void) {
  const wasActive = useRef(active);
  useEffect(() => {
    if (wasActive.current && !active) reload();
    wasActive.current = active;
  }, [active, reload]);
}

/**
 * One page of a study's runs, filtered and sorted by the server, live while the study is
 * active: a run event updates the rows shown in place; when the study's counts change and the
 * page's filters or sort depend on state, the page is fetched again (debounced); a gap in the
 * stream's seq refetches at once. Polling stays as a slow safety net.
 */
export function useStudyRunsPage(id: string, query: RunQuery, { active }: { active: boolean }) {
  const qc = useQueryClient();
  const key = useMemo(() => [...studyKeys.runs(id), query] as const, [id, query]);
  const keyRef = useRef(key);
  keyRef.current = key;
  const queryRef = useRef(query);
  queryRef.current = query;
  const lastCounts = useRef<string | null>(null);
  const reload = useCallback(
    () => void qc.invalidateQueries({ queryKey: studyKeys.runs(id) }),
    [qc, id],
  );
  const reloadSoon = useDebouncedCallback(reload, REFETCH_DEBOUNCE_MS);

  const onEvent = useCallback(
    (m: LiveMessage, missed: boolean) => {
      if (missed) reload();
      if (m.type === "subscribed") return;
      if (m.type === "runs" && Array.isArray(m.runs)) {
        qc.setQueryData<Page<Run>>(keyRef.current, (old) =>
          old ? { ...old, results: mergeRunEvents(old.results, m.runs) } : old,
        );
      }
      const counts = "progress" in m ? JSON.stringify(m.progress) : null;
      if (counts && counts !== lastCounts.current) {
        const before = lastCounts.current;
        lastCounts.current = counts;
        const total = (p: string | null) =>
          p ? Object.values(JSON.parse(p) as Record<string, number>).reduce((a, b) => a + b, 0) : 0;
        // runs added (extend) change every page; state changes those that filter by state
        if (pageMayChange(queryRef.current) || (before && total(before) !== total(counts)))
          reloadSoon();
      }
      void qc.invalidateQueries({ queryKey: studyKeys.detail(id), exact: true });
      void qc.invalidateQueries({ queryKey: ["quota"] });
    },
    [qc, id, reload, reloadSoon],
  );
  const live = useStudyStream(id, active, onEvent);
  useWhenEnded(active, reload);
  return useQuery({
    queryKey: key,
    queryFn: ({ signal }) => fetchRunsPage(query, { studyId: id, signal }),
    placeholderData: keepPreviousData,
    staleTime: 2_000,
    refetchInterval: studyPoll(active, live, env.pollMs * 2),
  });
}

/** A page of the runs across studies; polled while it shows runs that are not over. */
export function useRunsPage(query: RunQuery) {
  return useQuery({
    queryKey: runsKeys.page(query),
    queryFn: ({ signal }) => fetchRunsPage(query, { signal }),
    placeholderData: keepPreviousData,
    staleTime: 2_000,
    refetchInterval: (q) =>
      q.state.data?.results.some((r) => isActiveRun(r.state)) ? env.pollMs * 2 : 30_000,
  });
}

/** The most runs one selection holds: what "Continue selected…" sends in one request. */
export const MAX_SELECTED_RUNS = 1000;

/**
 * The runs ticked in a study's table, in the order ticked, kept in the page's URL
 * (`runs=a,b,…`: a comparison can be shared): tick or untick one, a whole page, or clear;
 * at most `max`.
 */
export function useRunSelectionInUrl(max = MAX_SELECTED_RUNS) {
  const [params, setParams] = useSearchParams();
  const ids = useMemo(() => params.get("runs")?.split(",").filter(Boolean) ?? [], [params]);
  const selected = useMemo(() => new Set(ids), [ids]);
  const update = useCallback(
    (change: (ticked: Set<string>) => void) =>
      setParams(
        (p) => {
          const next = new URLSearchParams(p);
          const ticked = new Set(next.get("runs")?.split(",").filter(Boolean) ?? []);
          change(ticked);
          if (ticked.size) next.set("runs", [...ticked].join(","));
          else next.delete("runs");
          return next;
        },
        { replace: true },
      ),
    [setParams],
  );
  const toggle = useCallback(
    (id: string) =>
      update((ticked) => {
        if (ticked.has(id)) ticked.delete(id);
        else if (ticked.size < max) ticked.add(id);
      }),
    [update, max],
  );
  const selectPage = useCallback(
    (page: string[], select: boolean) =>
      update((ticked) => {
        for (const id of page) {
          if (!select) ticked.delete(id);
          else if (ticked.size < max) ticked.add(id);
        }
      }),
    [update, max],
  );
  const clear = useCallback(() => update((ticked) => ticked.clear()), [update]);
  return { ids, selected, toggle, selectPage, clear };
}

/**
 * The runs ticked for the residual overlay, in the order of `ids`: taken from the page shown
 * (live), else fetched one by one (a selection may lie on another page, or come from a link).
 */
export function useSelectedRuns(ids: string[], shown: Run[] | undefined): Run[] {
  const onPage = useMemo(() => new Map((shown ?? []).map((r) => [r.id, r])), [shown]);
  const missing = ids.filter((i) => !onPage.has(i));
  const fetched = useQueries({
    queries: missing.map((runId) => ({
      queryKey: ["studies", "selected-run", runId] as const,
      queryFn: () => fetchRun(runId),
      staleTime: 10_000,
    })),
  });
  const byId = new Map(onPage);
  for (const q of fetched) if (q.data) byId.set(q.data.id, q.data);
  return ids.map((i) => byId.get(i)).filter((r): r is Run => !!r);
}

const TERMINAL = new Set<RunState>(TERMINAL_RUN_STATES);

/** How often a study's query polls: slowly while its live stream is subscribed, not at all
 * once the study is over. */
function studyPoll(active: boolean, live: boolean, withoutStream: number): number | false {
  return active ? (live ? LIVE_SAFETY_POLL_MS * 2 : withoutStream) : false;
}

/** Whether an event says that one of the study's runs ended. */
function runEnded(m: LiveMessage): boolean {
  return (
    m.type === "runs" &&
    Array.isArray(m.runs) &&
    m.runs.some((r) => r.state && TERMINAL.has(r.state))
  );
}

/**
 * A view computed from a study's runs (its objective plot, its surrogate), asked for again,
 * debounced, when an event says it changed (`changes`) or the stream missed events.
 */
function useStudyView<Q, T>(
  id: string,
  view: "plot" | "surrogate",
  q: Q | null,
  active: boolean,
  fetch: (id: string, q: Q, options: { signal: AbortSignal }) => Promise<T>,
  changes: (m: LiveMessage) => boolean,
) {
  const qc = useQueryClient();
  const viewKey = useMemo(() => [...studyKeys.detail(id), view] as const, [id, view]);
  // An answer in flight may have been computed before the change that asks for a reload (a
  // slow first read is not cancelled by an invalidation: it would be joined): ask once more
  // when it arrives.
  const again = useRef(false);
  const reload = useCallback(() => {
    if (qc.isFetching({ queryKey: viewKey }) > 0) again.current = true;
    else void qc.invalidateQueries({ queryKey: viewKey });
  }, [qc, viewKey]);
  const reloadSoon = useDebouncedCallback(reload, REFETCH_DEBOUNCE_MS);
  const onEvent = useCallback<StudyEventHandler>(
    (m, missed) => {
      if (missed || changes(m)) reloadSoon();
    },
    [changes, reloadSoon],
  );
  const live = useStudyStream(id, active && q !== null, onEvent);
  useWhenEnded(active, reload);
  const result = useQuery({
    queryKey: [...viewKey, q] as const,
    queryFn: ({ signal }) => fetch(id, q!, { signal }),
    enabled: q !== null,
    placeholderData: keepPreviousData,
    staleTime: 5_000,
    refetchInterval: studyPoll(active, live, env.pollMs * 3),
  });
  const fetching = result.isFetching;
  useEffect(() => {
    if (fetching || !again.current) return;
    again.current = false;
    void qc.invalidateQueries({ queryKey: viewKey });
  }, [fetching, qc, viewKey]);
  return result;
}

/**
 * The objective plot's data for a study, fetched again (debounced) when runs end while the
 * study is active, and when the stream missed events.
 */
export function useStudyPlot(id: string, q: PlotQuery | null, { active }: { active: boolean }) {
  return useStudyView(id, "plot", q, active, fetchStudyPlot, runEnded);
}

/** The study itself changed: an adaptive study's batch ended, or the study did. */
const surrogateChanges = (m: LiveMessage) => m.type === "study" || runEnded(m);

/**
 * An adaptive study's surrogate, asked for again when one of its runs ends (each completed
 * run refits it, and the end of a batch brings the next) or the live stream missed events.
 */
export function useStudySurrogate(
  id: string,
  q: SurrogateQuery | null,
  { active }: { active: boolean },
) {
  return useStudyView(id, "surrogate", q, active, fetchStudySurrogate, surrogateChanges);
}
