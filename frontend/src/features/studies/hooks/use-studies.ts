import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { env } from "@/lib/env";
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
 * Every run of a study, kept fresh while the study is active.
 *
 * Today this polls the REST API; with 10,000 runs a full reload is ten 1000-row requests, so
 * the interval grows with the study (2 s for small studies, up to 30 s). When the websocket
 * stream lands, only this hook changes: load the snapshot, then apply `run.*` events by seq.
 */
export function useStudyRuns(id: string, { active }: { active: boolean }) {
  return useQuery<Run[]>({
    queryKey: studyKeys.runs(id),
    queryFn: ({ signal }) => fetchAllRuns(id, { signal }),
    staleTime: 2_000,
    refetchInterval: (q) => {
      if (!active) return false;
      const n = q.state.data?.length ?? 0;
      return Math.min(30_000, Math.max(env.pollMs, Math.ceil(n / 1000) * 3_000));
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
