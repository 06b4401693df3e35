import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { env } from "@/lib/env";
import {
  addMember,
  checkBackend,
  composeImage,
  createBackend,
  createPool,
  createTenant,
  deleteBackend,
  deletePool,
  fetchAdminOverview,
  fetchAdminTenants,
  fetchBackend,
  fetchElastic,
  fetchOperationsRuns,
  fetchMembers,
  fetchPools,
  fetchTenantQuota,
  rebuildImage,
  removeMember,
  retireImage,
  setMemberRole,
  stopOperationsRun,
  updateBackend,
  updatePool,
  updateTenant,
  updateTenantQuota,
  type BackendCreate,
  type BackendPatch,
  type OperationsFilter,
  type PoolCreate,
  type PoolPatch,
  type QuotaInput,
  type Role,
  type TenantCreate,
  type TenantPatch,
} from "../api/admin";

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

export function useTenantQuota(name: string, enabled = true) {
  return useQuery({
    queryKey: ["admin", "quota", name],
    queryFn: () => fetchTenantQuota(name),
    staleTime: 5_000,
    enabled,
  });
}

export function useMembers(name: string, enabled = true) {
  return useQuery({
    queryKey: ["admin", "members", name],
    queryFn: () => fetchMembers(name),
    staleTime: 5_000,
    enabled,
  });
}

export function useBackend(name: string | null) {
  return useQuery({
    queryKey: ["admin", "backend", name],
    queryFn: () => fetchBackend(name as string),
    staleTime: 5_000,
    enabled: !!name,
  });
}

/** A write whose success refreshes every admin query (tenants, overview, quotas, members). */
function useAdminMutation<A, R>(fn: (arg: A) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: fn,
    onSuccess: () => client.invalidateQueries({ queryKey: ["admin"] }),
  });
}

export const useCreateTenant = () => useAdminMutation((body: TenantCreate) => createTenant(body));
export const useUpdateTenant = () =>
  useAdminMutation(({ name, body }: { name: string; body: TenantPatch }) =>
    updateTenant(name, body),
  );
export const useUpdateQuota = () =>
  useAdminMutation(({ name, body }: { name: string; body: QuotaInput }) =>
    updateTenantQuota(name, body),
  );
export const useAddMember = () =>
  useAdminMutation(({ name, user, role }: { name: string; user: string; role: Role }) =>
    addMember(name, user, role),
  );
export const useSetMemberRole = () =>
  useAdminMutation(({ name, userId, role }: { name: string; userId: number; role: Role }) =>
    setMemberRole(name, userId, role),
  );
export const useRemoveMember = () =>
  useAdminMutation(({ name, userId }: { name: string; userId: number }) =>
    removeMember(name, userId),
  );
export const useCreateBackend = () =>
  useAdminMutation((body: BackendCreate) => createBackend(body));
export const useUpdateBackend = () =>
  useAdminMutation(({ name, body }: { name: string; body: BackendPatch }) =>
    updateBackend(name, body),
  );
export const useDeleteBackend = () => useAdminMutation((name: string) => deleteBackend(name));
export const useCheckBackend = () => useAdminMutation((name: string) => checkBackend(name));
export const useComposeImage = () =>
  useAdminMutation(({ packages, kind }: { packages: string[]; kind: "container" | "vm" }) =>
    composeImage(packages, kind),
  );
export const useRebuildImage = () => useAdminMutation((id: number) => rebuildImage(id));
export const useRetireImage = () => useAdminMutation((id: number) => retireImage(id));

/** The elastic partition's nodes, refreshed while the panel is open. */
export function useElastic(name: string) {
  return useQuery({
    queryKey: ["admin", "backends", name, "elastic"],
    queryFn: () => fetchElastic(name),
    staleTime: 5_000,
    refetchInterval: env.pollMs * 5,
    retry: false,
  });
}
export function usePools() {
  return useQuery({
    queryKey: ["admin", "pools"],
    queryFn: fetchPools,
    staleTime: 2_000,
    refetchInterval: env.pollMs * 2,
  });
}

export const useUpdatePool = () =>
  useAdminMutation(({ name, body }: { name: string; body: PoolPatch }) => updatePool(name, body));
export const useCreatePool = () => useAdminMutation((body: PoolCreate) => createPool(body));
export const useDeletePool = () => useAdminMutation((name: string) => deletePool(name));

/** Every tenant's active runs as the operations page filters them, kept fresh. */
export function useOperationsRuns(filter: OperationsFilter) {
  return useQuery({
    queryKey: ["admin", "runs", filter],
    queryFn: () => fetchOperationsRuns(filter),
    staleTime: 2_000,
    refetchInterval: env.pollMs * 2,
  });
}

export const useStopOperationsRun = () =>
  useAdminMutation(({ id, reason }: { id: string; reason: string }) =>
    stopOperationsRun(id, reason),
  );
