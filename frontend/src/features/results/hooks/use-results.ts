import { useQueries, useQuery } from "@tanstack/react-query";
import {
  fetchCompletedRuns,
  fetchFieldData,
  fetchRunById,
  fetchRunFields,
  type RunFields,
} from "../api/results";

export const resultKeys = {
  fields: (id: string) => ["runs", "detail", id, "fields"] as const,
  field: (id: string, field: string, region: string) =>
    ["runs", "detail", id, "fields", field, region] as const,
  completed: (studyId: string) => ["studies", studyId, "completed-runs"] as const,
  run: (id: string) => ["runs", "detail", id, "compare"] as const,
};

/** Ask again each second while a completed run's fields are being made (its first view
 * asked for them), then no more. */
function whilePreparing(query: { state: { data?: RunFields } }): number | false {
  return query.state.data?.preparing ? PREPARING_POLL_MS : false;
}

export const PREPARING_POLL_MS = 1000;

/** The run's flow-field index; only asked once the run has ended (nothing before). */
export function useRunFields(id: string, { enabled = true }: { enabled?: boolean } = {}) {
  return useQuery({
    queryKey: resultKeys.fields(id),
    queryFn: () => fetchRunFields(id),
    enabled: enabled && !!id,
    staleTime: 60_000,
    refetchInterval: whilePreparing,
  });
}

export function useFieldData(id: string, field: string | null, region: string | null) {
  return useQuery({
    queryKey: resultKeys.field(id, field ?? "", region ?? ""),
    queryFn: () => fetchFieldData(id, field!, region!),
    enabled: !!id && !!field && !!region,
    staleTime: 5 * 60_000,
  });
}

/** Several runs' flow-field indexes, in order. */
export function useRunsFields(ids: string[]) {
  return useQueries({
    queries: ids.map((id) => ({
      queryKey: resultKeys.fields(id),
      queryFn: () => fetchRunFields(id),
      staleTime: 60_000,
      refetchInterval: whilePreparing,
    })),
  });
}

export function useFieldsData(ids: string[], field: string | null, region: string | null) {
  return useQueries({
    queries: ids.map((id) => ({
      queryKey: resultKeys.field(id, field ?? "", region ?? ""),
      queryFn: () => fetchFieldData(id, field!, region!),
      enabled: !!field && !!region,
      staleTime: 5 * 60_000,
    })),
  });
}

export function useCompletedRuns(studyId: string, { active }: { active: boolean }) {
  return useQuery({
    queryKey: resultKeys.completed(studyId),
    queryFn: () => fetchCompletedRuns(studyId),
    enabled: !!studyId,
    staleTime: 5_000,
    refetchInterval: active ? 10_000 : false,
  });
}

export function useRunsByIds(ids: string[]) {
  return useQueries({
    queries: ids.map((id) => ({
      queryKey: resultKeys.run(id),
      queryFn: () => fetchRunById(id),
      staleTime: 10_000,
    })),
  });
}
