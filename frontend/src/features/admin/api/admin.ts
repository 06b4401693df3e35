import type { components } from "@/generated/api";
import { api, unwrap } from "@/lib/api-client";

export type AdminTenant = components["schemas"]["AdminTenant"];
export type AdminOverview = components["schemas"]["AdminOverview"];
export type AdminBackend = components["schemas"]["AdminBackend"];

export function fetchAdminTenants(): Promise<AdminTenant[]> {
  return unwrap(api.GET("/api/v1/admin/tenants/"));
}

export function fetchAdminOverview(): Promise<AdminOverview> {
  return unwrap(api.GET("/api/v1/admin/overview/"));
}
