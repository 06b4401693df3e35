import type { components } from "@/generated/api";
import { api, unwrap } from "@/lib/api-client";

type Schemas = components["schemas"];

export type AdminTenant = Schemas["AdminTenant"];
export type AdminOverview = Schemas["AdminOverview"];
export type AdminBackend = Schemas["AdminBackend"];
export type AdminImage = Schemas["AdminImage"];
export type BackendAdmin = Schemas["BackendAdminOut"];
export type BackendKind = Schemas["BackendKindEnum"];
export type Member = Schemas["Member"];
export type Role = Schemas["RoleEnum"];
export type QuotaAdmin = Schemas["QuotaAdmin"];
export type QuotaInput = Schemas["PatchedQuotaInRequest"];
export type TenantCreate = Schemas["TenantCreateRequest"];
export type TenantPatch = Schemas["PatchedTenantPatchRequest"];
export type BackendCreate = Schemas["BackendAdminInRequest"];
export type BackendPatch = Schemas["PatchedBackendAdminPatchRequest"];
export type ImageDetail = Schemas["ImageDetail"];
export type ElasticReport = Schemas["ElasticReport"];

export function fetchAdminTenants(): Promise<AdminTenant[]> {
  return unwrap(api.GET("/api/v1/admin/tenants/"));
}

export function fetchAdminOverview(): Promise<AdminOverview> {
  return unwrap(api.GET("/api/v1/admin/overview/"));
}

// --- tenants, members, quotas ----------------------------------------------------------------

export function createTenant(body: TenantCreate): Promise<AdminTenant> {
  return unwrap(api.POST("/api/v1/admin/tenants/", { body }));
}

export function updateTenant(name: string, body: TenantPatch): Promise<AdminTenant> {
  return unwrap(api.PATCH("/api/v1/admin/tenants/{name}/", { params: { path: { name } }, body }));
}

export function fetchTenantQuota(name: string): Promise<QuotaAdmin> {
  return unwrap(api.GET("/api/v1/admin/tenants/{name}/quota/", { params: { path: { name } } }));
}

export function updateTenantQuota(name: string, body: QuotaInput): Promise<QuotaAdmin> {
  return unwrap(
    api.PATCH("/api/v1/admin/tenants/{name}/quota/", { params: { path: { name } }, body }),
  );
}

export function fetchMembers(name: string): Promise<Member[]> {
  return unwrap(api.GET("/api/v1/admin/tenants/{name}/members/", { params: { path: { name } } }));
}

export function addMember(name: string, user: string, role: Role): Promise<Member> {
  return unwrap(
    api.POST("/api/v1/admin/tenants/{name}/members/", {
      params: { path: { name } },
      body: { user, role },
    }),
  );
}

export function setMemberRole(name: string, userId: number, role: Role): Promise<Member> {
  return unwrap(
    api.PATCH("/api/v1/admin/tenants/{name}/members/{user_id}/", {
      params: { path: { name, user_id: userId } },
      body: { role },
    }),
  );
}

export async function removeMember(name: string, userId: number): Promise<void> {
  await unwrap(
    api.DELETE("/api/v1/admin/tenants/{name}/members/{user_id}/", {
      params: { path: { name, user_id: userId } },
    }),
  );
}

// --- backends ----------------------------------------------------------------------------------

export function fetchBackend(name: string): Promise<BackendAdmin> {
  return unwrap(api.GET("/api/v1/admin/backends/{name}/", { params: { path: { name } } }));
}

export function createBackend(body: BackendCreate): Promise<BackendAdmin> {
  return unwrap(api.POST("/api/v1/admin/backends/", { body }));
}

export function updateBackend(name: string, body: BackendPatch): Promise<BackendAdmin> {
  return unwrap(api.PATCH("/api/v1/admin/backends/{name}/", { params: { path: { name } }, body }));
}

export async function deleteBackend(name: string): Promise<void> {
  await unwrap(api.DELETE("/api/v1/admin/backends/{name}/", { params: { path: { name } } }));
}

/** The driver's health check: `{ok: true, capacity, …}` or `{ok: false, error}`. */
export interface BackendCheck {
  ok: boolean;
  error?: string;
  capacity?: { cores: number; memory_gb: number; nodes: number };
  capacity_stored?: boolean;
  [key: string]: unknown;
}

export async function checkBackend(name: string): Promise<BackendCheck> {
  return (await unwrap(
    api.POST("/api/v1/admin/backends/{name}/check/", { params: { path: { name } } }),
  )) as BackendCheck;
}

/** A Slurm backend's elastic partition: each node's Slurm state beside its server's. */
export function fetchElastic(name: string): Promise<ElasticReport> {
  return unwrap(api.GET("/api/v1/admin/backends/{name}/elastic/", { params: { path: { name } } }));
}

// --- images ------------------------------------------------------------------------------------

export function composeImage(packages: string[], kind: "container" | "vm"): Promise<ImageDetail> {
  return unwrap(api.POST("/api/v1/images/", { body: { packages, kind } }));
}

export function rebuildImage(id: number): Promise<ImageDetail> {
  return unwrap(api.POST("/api/v1/images/{id}/rebuild/", { params: { path: { id } } }));
}

export function retireImage(id: number): Promise<ImageDetail> {
  return unwrap(api.POST("/api/v1/images/{id}/retire/", { params: { path: { id } } }));
}

// --- warm pools (docs/pools.md) ---------------------------------------------------------------

export type Pool = Schemas["PoolOut"];
export type PoolWorker = Schemas["PoolWorker"];
export type PoolPatch = Schemas["PatchedPoolPatchRequest"];
export type PoolCreate = Schemas["PoolInRequest"];

export function fetchPools(): Promise<Pool[]> {
  return unwrap(api.GET("/api/v1/admin/pools/"));
}

export function updatePool(name: string, body: PoolPatch): Promise<Pool> {
  return unwrap(api.PATCH("/api/v1/admin/pools/{name}/", { params: { path: { name } }, body }));
}

export function createPool(body: PoolCreate): Promise<Pool> {
  return unwrap(api.POST("/api/v1/admin/pools/", { body }));
}

/** Deleted at once (204: nothing), or draining (202: the pool, `draining: true`). */
export async function deletePool(name: string): Promise<Pool | null> {
  const pool = await unwrap(
    api.DELETE("/api/v1/admin/pools/{name}/", { params: { path: { name } } }),
  );
  return (pool as Pool | undefined) ?? null;
}

// --- operations: every tenant's active runs (docs/admin.md) -----------------------------------

export type OperationsRun = Schemas["OperationsRun"];
export type OperationsRunsPage = Schemas["OperationsRunsPage"];

export interface OperationsFilter {
  tenant?: string;
  backend?: string;
  state?: string[];
}

export function fetchOperationsRuns(filter: OperationsFilter): Promise<OperationsRunsPage> {
  return unwrap(
    api.GET("/api/v1/admin/runs/", {
      params: {
        query: {
          ...(filter.tenant ? { tenant: filter.tenant } : {}),
          ...(filter.backend ? { backend: filter.backend } : {}),
          ...(filter.state?.length ? { state: filter.state } : {}),
          limit: 200,
        },
      },
    }),
  );
}

export function stopOperationsRun(id: string, reason: string): Promise<OperationsRun> {
  return unwrap(
    api.POST("/api/v1/admin/runs/{run_id}/stop/", {
      params: { path: { run_id: id } },
      body: { reason },
    }),
  );
}
