import { api, unwrap } from "@/lib/api-client";
import type { Backend, CaseTemplate, SolverPackage } from "@/lib/types";

export async function fetchTemplates(): Promise<CaseTemplate[]> {
  return await unwrap(api.GET("/api/v1/templates/"));
}

export async function fetchPackages(): Promise<SolverPackage[]> {
  return await unwrap(api.GET("/api/v1/packages/"));
}

export async function fetchBackends(): Promise<Backend[]> {
  return unwrap(api.GET("/api/v1/backends/"));
}
