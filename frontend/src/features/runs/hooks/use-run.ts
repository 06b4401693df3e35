import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { env } from "@/lib/env";
import { isActiveRun } from "@/lib/types";
import { cancelRun, fetchRun, fetchRunLog } from "../api/runs";

export const runKeys = {
  detail: (id: string) => ["runs", "detail", id] as const,
  log: (id: string) => ["runs", "detail", id, "log"] as const,
};

export function useRun(id: string) {
  return useQuery({
    queryKey: runKeys.detail(id),
    queryFn: () => fetchRun(id),
    staleTime: 1_000,
    refetchInterval: (q) => (isActiveRun(q.state.data?.state) ? env.pollMs : false),
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
