import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useCallback, useRef } from "react";
import { env } from "@/lib/env";
import { LIVE_SAFETY_POLL_MS, useLiveStream, type LiveMessage } from "@/lib/live";
import { isActiveStudy, type ParameterSpec, type Run, type Study } from "@/lib/types";
import {
  cancelStudy,
  cloneStudy,
  deleteStudy,
  extendStudy,
  fetchActiveRuns,
  fetchAllRuns,
  fetchStudies,
  fetchStudy,
  submitStudy,
  type StudyListParams,
} from "../api/studies";

export const studyKeys = {
  all: ["studies"] as const,
  list: (p: StudyListParams) => ["studies", "list", p] as const,
  detail: (id: string) => ["studies", "detail", id] as const,
  runs: (id: string) => ["studies", "detail", id, "runs"] as const,
};

export function useStudies(params: StudyListParams, { live = true } = {}) {
  return useQuery({
    queryKey: studyKeys.list(params),
    queryFn: () => fetchStudies(params),
    placeholderData: keepPreviousData,
    staleTime: 5_000,
    refetchInterval: (q) =>
      live && q.state.data?.results.some((s) => isActiveStudy(s.state)) ? env.pollMs * 2 : false,
  });
}

export function useStudy(id: string) {
  return useQuery({
    queryKey: studyKeys.detail(id),
    queryFn: () => fetchStudy(id),
    staleTime: 2_000,
    refetchInterval: (q) => (isActiveStudy(q.state.data?.state) ? env.pollMs : false),
  });
}

/**
 * Merge a study-stream `runs` event into the cached runs (by id). Returns the new array, or
 * null when nothing applies.
 */
export function mergeRunEvents(runs: Run[], changed: Partial<Run>[]): Run[] {
  const byId = new Map(changed.filter((r) => r.id).map((r) => [r.id!, r]));
  if (!byId.size) return runs;
  return runs.map((r) => {
    const update = byId.get(r.id);
    return update ? ({ ...r, ...update } as Run) : r;
  });
}

/**
 * Every run of a study, live while the study is active.
 *
 * The REST snapshot loads every page (1000 runs per request); the study's websocket then
 * merges each run transition into it, and a gap in the stream's seq reloads the snapshot.
 * Polling remains as a safety net (slower for bigger studies) and takes over without a socket.
 */
export function useStudyRuns(id: string, { active }: { active: boolean }) {
  const qc = useQueryClient();
  const lastSeq = useRef<number | null>(null);
  const onMessage = useCallback(
    (m: LiveMessage) => {
      const reload = () => void qc.invalidateQueries({ queryKey: studyKeys.runs(id), exact: true });
      if (m.type === "subscribed") {
        lastSeq.current = m.seq;
        reload(); // the snapshot may predate the subscription
        return;
      }
      if (lastSeq.current !== null && m.seq !== lastSeq.current + 1) reload();
      lastSeq.current = Math.max(lastSeq.current ?? 0, m.seq);
      if (m.type === "runs" && Array.isArray(m.runs)) {
        qc.setQueryData<Run[]>(studyKeys.runs(id), (old) =>
          old ? mergeRunEvents(old, m.runs as Partial<Run>[]) : old,
        );
      }
      void qc.invalidateQueries({ queryKey: studyKeys.detail(id), exact: true });
      void qc.invalidateQueries({ queryKey: ["quota"] });
    },
    [qc, id],
  );
  const live = useLiveStream(active ? `/ws/studies/${id}/` : null, onMessage);
  return useQuery<Run[]>({
    queryKey: studyKeys.runs(id),
    queryFn: ({ signal }) => fetchAllRuns(id, { signal }),
    staleTime: 2_000,
    refetchInterval: (q) => {
      if (!active) return false;
      const n = q.state.data?.length ?? 0;
      const poll = Math.min(30_000, Math.max(env.pollMs, Math.ceil(n / 1000) * 3_000));
      return live ? Math.max(LIVE_SAFETY_POLL_MS, poll * 2) : poll;
    },
  });
}

export function useActiveRuns() {
  return useQuery({
    queryKey: ["runs", "active"],
    queryFn: fetchActiveRuns,
    staleTime: 2_000,
    refetchInterval: env.pollMs * 2,
  });
}

function useStudyMutation<A>(fn: (id: string, arg: A) => Promise<Study | void>) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ id, arg }: { id: string; arg: A }) => fn(id, arg),
    onSuccess: (study, { id }) => {
      if (study) qc.setQueryData(studyKeys.detail(study.id), study);
      void qc.invalidateQueries({ queryKey: studyKeys.all });
      void qc.invalidateQueries({ queryKey: ["quota"] });
      void qc.invalidateQueries({ queryKey: studyKeys.detail(id) });
    },
  });
}

export const useCancelStudy = () => useStudyMutation<void>((id) => cancelStudy(id));
export const useSubmitStudy = () => useStudyMutation<void>((id) => submitStudy(id));
export const useDeleteStudy = () => useStudyMutation<void>((id) => deleteStudy(id));
export const useCloneStudy = () =>
  useStudyMutation<string | undefined>((id, name) => cloneStudy(id, name));
export const useExtendStudy = () =>
  useStudyMutation<Record<string, ParameterSpec>>((id, params) => extendStudy(id, params));
