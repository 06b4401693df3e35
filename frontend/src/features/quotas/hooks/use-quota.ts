import { useQuery } from "@tanstack/react-query";
import { env } from "@/lib/env";
import { fetchQuota } from "../api/quota";

export function useQuota({ live = true }: { live?: boolean } = {}) {
  return useQuery({
    queryKey: ["quota"],
    queryFn: fetchQuota,
    staleTime: 2_000,
    refetchInterval: live ? env.pollMs * 2 : false,
  });
}
