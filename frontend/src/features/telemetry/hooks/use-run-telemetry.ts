import { useQueries, useQuery, useQueryClient, type QueryKey } from "@tanstack/react-query";
import { env } from "@/lib/env";
import type { Telemetry } from "@/lib/types";
import { fetchTelemetry } from "../api/telemetry";

export interface TelemetryOptions {
  /** Which of the run's series to load, chosen from the names it has. */
  pick: (available: string[]) => string[];
  /** A stable name for `pick` (part of the cache key). */
  pickKey: string;
  /** Poll while the run is active. */
  active: boolean;
  /** Server-side downsampling per series (the plots stay smooth at any run length). */
  maxPoints?: number;
}

export const telemetryKey = (runId: string, pickKey: string, maxPoints: number): QueryKey => [
  "runs",
  "detail",
  runId,
  "telemetry",
  pickKey,
  maxPoints,
];

/**
 * One run's telemetry, refreshed while it runs.
 *
 * The names a run has grow as it goes (forceCoeffs appears after the first write), so each
 * poll asks for the series picked from the previous answer's `available`, and asks again
 * right away when new names appeared. When the websocket stream lands, this hook applies
 * `telemetry` events to the cached series instead of polling; its callers do not change.
 */
export function useRunTelemetry(runId: string, opts: TelemetryOptions) {
  const qc = useQueryClient();
  const maxPoints = opts.maxPoints ?? 1500;
  const key = telemetryKey(runId, opts.pickKey, maxPoints);
  return useQuery({
    queryKey: key,
    queryFn: ({ signal }) =>
      loadPicked(runId, opts.pick, maxPoints, qc.getQueryData<Telemetry>(key), signal),
    staleTime: 1_000,
    refetchInterval: opts.active ? env.pollMs : false,
    placeholderData: (prev) => prev,
  });
}

async function loadPicked(
  runId: string,
  pick: (available: string[]) => string[],
  maxPoints: number,
  previous: Telemetry | undefined,
  signal?: AbortSignal,
): Promise<Telemetry> {
  const wanted = previous ? pick(previous.available) : [];
  let data = await fetchTelemetry(runId, wanted, maxPoints, signal);
  const now = pick(data.available);
  if (now.some((n) => !wanted.includes(n))) {
    data = await fetchTelemetry(runId, now, maxPoints, signal);
  }
  return data;
}

/** The same series of several runs (the residual overlay of a study). */
export function useRunsTelemetry(
  runs: { id: string; active: boolean }[],
  opts: Omit<TelemetryOptions, "active">,
) {
  const qc = useQueryClient();
  const maxPoints = opts.maxPoints ?? 600;
  return useQueries({
    queries: runs.map((run) => {
      const key = telemetryKey(run.id, opts.pickKey, maxPoints);
      return {
        queryKey: key,
        queryFn: ({ signal }: { signal: AbortSignal }) =>
          loadPicked(run.id, opts.pick, maxPoints, qc.getQueryData<Telemetry>(key), signal),
        staleTime: 1_000,
        refetchInterval: run.active ? env.pollMs * 1.5 : (false as const),
      };
    }),
  });
}
