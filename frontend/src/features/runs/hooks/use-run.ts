import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useCallback } from "react";
import { env } from "@/lib/env";
import { useLiveStream, type LiveMessage } from "@/lib/live";
import { isActiveRun, type ContinueRequest, type RunDetail } from "@/lib/types";
import { cancelRun, continueRun, fetchRun, fetchRunLog } from "../api/runs";

export const runKeys = {
  detail: (id: string) => ["runs", "detail", id] as const,
  log: (id: string) => ["runs", "detail", id, "log"] as const,
};

/**
 * One run, live while it is active: `state` events of the run's websocket apply at once
 * (then the details reload); polling covers heartbeat values and a missing socket.
 */
export function useRun(id: string) {
  const qc = useQueryClient();
  const cached = qc.getQueryData<RunDetail>(runKeys.detail(id));
  const onMessage = useCallback(
    (m: LiveMessage) => {
      if (m.type !== "state") return;
      qc.setQueryData<RunDetail>(runKeys.detail(id), (old) =>
        old && m.seq > old.last_seq ? { ...old, ...m.run, last_seq: m.seq } : old,
      );
      void qc.invalidateQueries({ queryKey: runKeys.detail(id), exact: true });
    },
    [qc, id],
  );
  const live = useLiveStream(isActiveRun(cached?.state) ? `/ws/runs/${id}/` : null, onMessage);
  return useQuery({
    queryKey: runKeys.detail(id),
    queryFn: () => fetchRun(id),
    staleTime: 1_000,
    refetchInterval: (q) =>
      isActiveRun(q.state.data?.state) ? (live ? env.pollMs * 2 : env.pollMs) : false,
  });
}

export function useRunLog(
  id: string,
  { active, lines = 200 }: { active: boolean; lines?: number },
) {
  return useQuery({
    queryKey: [...runKeys.log(id), lines],
    queryFn: () => fetchRunLog(id, lines),
    staleTime: 1_000,
    refetchInterval: active ? env.pollMs : false,
  });
}

export function useCancelRun() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: cancelRun,
    onSuccess: (run) => {
      qc.setQueryData(runKeys.detail(run.id), run);
      void qc.invalidateQueries({ queryKey: ["studies"] });
      void qc.invalidateQueries({ queryKey: ["quota"] });
      void qc.invalidateQueries({ queryKey: ["runs", "active"] });
    },
  });
}

/**
 * Continue or restart an ended run: the run comes back pending (its page follows it live from
 * there), and what counts runs (its study, the quota, the active runs) is read again.
 */
export function useContinueRun() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ id, body }: { id: string; body: ContinueRequest }) => continueRun(id, body),
    onSuccess: (run) => {
      qc.setQueryData(runKeys.detail(run.id), run);
      void qc.invalidateQueries({ queryKey: runKeys.detail(run.id) });
      void qc.invalidateQueries({ queryKey: ["studies"] });
      void qc.invalidateQueries({ queryKey: ["quota"] });
      void qc.invalidateQueries({ queryKey: ["runs", "active"] });
    },
  });
}
