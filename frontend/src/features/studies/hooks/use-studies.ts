import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { env } from "@/lib/env";
import {
  isActiveStudy,
  type ObjectiveSpec,
  type ParameterSpec,
  type Run,
  type Study,
  type StudyContinueRequest,
} from "@/lib/types";
import {
  cancelStudy,
  cloneStudy,
  continueStudyRuns,
  deleteStudy,
  extendStudy,
  fetchActiveRuns,
  fetchStudies,
  fetchStudy,
  fetchStudyDeletions,
  fetchStudyInspection,
  submitStudy,
  updateStudyObjectives,
  type StudyListParams,
  type TrustRules,
} from "../api/studies";

export const studyKeys = {
  all: ["studies"] as const,
  list: (p: StudyListParams) => ["studies", "list", p] as const,
  detail: (id: string) => ["studies", "detail", id] as const,
  deletions: ["studies", "deletions"] as const,
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

/** Studies being deleted in the background, read again while any is (the list is empty
 * once each is gone entirely). */
export function useStudyDeletions() {
  return useQuery({
    queryKey: studyKeys.deletions,
    queryFn: fetchStudyDeletions,
    staleTime: 1_000,
    refetchInterval: (q) => (q.state.data?.length ? env.pollMs : false),
  });
}

export function useStudy(id: string) {
  return useQuery({
    queryKey: studyKeys.detail(id),
    queryFn: () => fetchStudy(id),
    enabled: !!id, // a run page asks before it knows its study
    staleTime: 2_000,
    refetchInterval: (q) => (isActiveStudy(q.state.data?.state) ? env.pollMs : false),
  });
}

/**
 * Merge a study-stream `runs` event into the runs shown (by id): changed rows are new objects,
 * the others keep their identity (no re-render). Runs not shown are ignored.
 */
export function mergeRunEvents(runs: Run[], changed: Partial<Run>[]): Run[] {
  const byId = new Map(changed.filter((r) => r.id).map((r) => [r.id!, r]));
  if (!byId.size) return runs;
  return runs.map((r) => {
    const update = byId.get(r.id);
    return update ? ({ ...r, ...update } as Run) : r;
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
/** Edit a study's objectives; its runs and plot are read again (recomputed on the server). */
export function useUpdateObjectives() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({
      id,
      objectives,
      trust,
    }: {
      id: string;
      objectives: Record<string, ObjectiveSpec>;
      trust?: TrustRules;
    }) => updateStudyObjectives(id, objectives, trust),
    onSuccess: (study) => {
      qc.setQueryData(studyKeys.detail(study.id), study);
      void qc.invalidateQueries({ queryKey: studyKeys.all });
      void qc.invalidateQueries({ queryKey: ["runs"] });
    },
  });
}

export function useStudyInspection(study: Study, enabled: boolean) {
  return useQuery({
    queryKey: ["studies", "inspection", study.id],
    queryFn: () => fetchStudyInspection(study),
    enabled,
    staleTime: 60_000,
  });
}

export const useExtendStudy = () =>
  useStudyMutation<Record<string, ParameterSpec>>((id, params) => extendStudy(id, params));

/**
 * Continue a selection of a study's runs: the study, its runs pages and plots, the quota and
 * the active runs are read again (the runs that went on are pending now).
 */
export function useContinueStudyRuns() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ id, body }: { id: string; body: StudyContinueRequest }) =>
      continueStudyRuns(id, body),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: studyKeys.all });
      void qc.invalidateQueries({ queryKey: ["runs"] });
      void qc.invalidateQueries({ queryKey: ["quota"] });
    },
  });
}
