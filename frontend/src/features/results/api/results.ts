import type { components } from "@/generated/api";
import { api, unwrap } from "@/lib/api-client";
import type { Run } from "@/lib/types";

export type RunFields = components["schemas"]["RunFields"];
export type RunFieldData = components["schemas"]["RunFieldData"];
export type FieldGrid = components["schemas"]["FieldGrid"];
export type SurfaceCp = components["schemas"]["SurfaceCp"];

/** What flow fields a run has (a completed run's final fields on a plane, and Cp). */
export async function fetchRunFields(id: string): Promise<RunFields> {
  return await unwrap(api.GET("/api/v1/runs/{id}/fields/", { params: { path: { id } } }));
}

/** One field on one region's grid. */
export async function fetchFieldData(
  id: string,
  field: string,
  region: string,
): Promise<RunFieldData> {
  return await unwrap(
    api.GET("/api/v1/runs/{id}/fields/data/", {
      params: { path: { id }, query: { field, region } },
    }),
  );
}

/** A study's completed runs (up to 1,000: the polar plot's points). */
export async function fetchCompletedRuns(studyId: string): Promise<Run[]> {
  const data = await unwrap(
    api.GET("/api/v1/studies/{id}/runs/", {
      params: { path: { id: studyId }, query: { state: ["completed"], page_size: 1000 } },
    }),
  );
  return data.results;
}

export async function fetchRunById(id: string): Promise<Run> {
  return await unwrap(api.GET("/api/v1/runs/{id}/", { params: { path: { id } } }));
}
