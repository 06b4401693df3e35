import { useQuery } from "@tanstack/react-query";
import { env } from "@/lib/env";
import { fetchAdminOverview, fetchAdminTenants } from "../api/admin";

export function useAdminTenants() {
  return useQuery({
    queryKey: ["admin", "tenants"],
    queryFn: fetchAdminTenants,
    staleTime: 5_000,
    refetchInterval: env.pollMs * 5,
  });
}

export function useAdminOverview() {
  return useQuery({
    queryKey: ["admin", "overview"],
    queryFn: fetchAdminOverview,
    staleTime: 5_000,
    refetchInterval: env.pollMs * 5,
  });
}
