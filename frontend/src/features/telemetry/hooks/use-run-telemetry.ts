import {
  useQueries,
  useQuery,
  useQueryClient,
  type QueryClient,
  type QueryKey,
} from "@tanstack/react-query";
import { useCallback } from "react";
import { decimate } from "@/lib/decimate";
import { env } from "@/lib/env";
import { LIVE_SAFETY_POLL_MS, useLiveStream, type LiveMessage } from "@/lib/live";
import type { Telemetry, TelemetrySeries } from "@/lib/types";
import { fetchTelemetry } from "../api/telemetry";

export interface TelemetryOptions {
  /** Which of the run's series to load, chosen from the names it has. */
  pick: (available: string[]) => string[];
  /** A stable name for `pick` (part of the cache key). */
  pickKey: string;
  /** Follow the run (websocket, polling as a fallback) while it is active. */
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
 * Apply one run-stream event to a cached snapshot: append the points of the picked series
 * (events older than the snapshot are ignored), or return "gap" when an event went missing.
 */
export function applyRunEvent(
  data: Telemetry,
  message: LiveMessage,
  pick: (available: string[]) => string[],
  maxPoints: number,
): Telemetry | "gap" | null {
  if (message.seq <= data.last_seq) return null;
  if (message.seq !== data.last_seq + 1) return "gap";
  if (message.type !== "telemetry") return { ...data, last_seq: message.seq };
  const incoming = message.series;
  const available = [...new Set([...data.available, ...Object.keys(incoming)])].sort();
  const wanted = new Set(pick(available));
  const series: Record<string, TelemetrySeries> = { ...data.series };
  for (const [name, points] of Object.entries(incoming)) {
    if (!wanted.has(name)) continue;
    const prev = series[name] ?? { x: [], y: [], points: 0, returned: 0 };
    let x = prev.x.slice();
    let y = prev.y.slice();
    for (const [px, py] of points) {
      if (py === null || !Number.isFinite(py)) continue;
      x.push(px);
      y.push(py);
    }
    if (x.length > maxPoints * 2) ({ x, y } = decimate(x, y, maxPoints));
    series[name] = { x, y, points: prev.points + points.length, returned: x.length };
  }
  return { ...data, available, series, last_seq: message.seq };
}

function onRunEvent(
  qc: QueryClient,
  key: QueryKey,
  pick: (available: string[]) => string[],
  maxPoints: number,
  message: LiveMessage,
) {
  const data = qc.getQueryData<Telemetry>(key);
  if (!data) return;
  const next = applyRunEvent(data, message, pick, maxPoints);
  if (next === "gap") void qc.invalidateQueries({ queryKey: key, exact: true });
  else if (next) qc.setQueryData(key, next);
}

/**
 * One run's telemetry, live while it runs.
 *
 * The REST snapshot (downsampled, with `last_seq`) comes first; the run's websocket then
 * appends each batch of points, and a missing event reloads the snapshot. Polling stays as a
 * slow safety net while the socket is up, and takes over when it is down. The names a run has
 * grow as it goes (forceCoeffs appears after the first write): each load asks for the series
 * picked from the previous answer's `available`, and asks again when new names appeared.
 */
export function useRunTelemetry(runId: string, opts: TelemetryOptions) {
  const qc = useQueryClient();
  const maxPoints = opts.maxPoints ?? 1500;
  const key = telemetryKey(runId, opts.pickKey, maxPoints);
  const { pick } = opts;
  const onMessage = useCallback(
    (m: LiveMessage) =>
      onRunEvent(qc, telemetryKey(runId, opts.pickKey, maxPoints), pick, maxPoints, m),
    [qc, runId, opts.pickKey, maxPoints, pick],
  );
  const live = useLiveStream(opts.active ? `/ws/runs/${runId}/` : null, onMessage);
  return useQuery({
    queryKey: key,
    queryFn: ({ signal }) =>
      loadPicked(runId, pick, maxPoints, qc.getQueryData<Telemetry>(key), signal),
    staleTime: 1_000,
    refetchInterval: opts.active ? (live ? LIVE_SAFETY_POLL_MS : env.pollMs) : false,
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

/** The same series of several runs (the residual overlay of a study), polled while active. */
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
