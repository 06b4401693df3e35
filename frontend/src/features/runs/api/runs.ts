import { api, unwrap } from "@/lib/api-client";
import type { ContinueRequest, RunDetail } from "@/lib/types";

export async function fetchRun(id: string): Promise<RunDetail> {
  return await unwrap(api.GET("/api/v1/runs/{id}/", { params: { path: { id } } }));
}

export async function cancelRun(id: string): Promise<RunDetail> {
  return await unwrap(api.POST("/api/v1/runs/{id}/cancel/", { params: { path: { id } } }));
}

/** Queue an ended run again to go on from one of its writes (202: the run, pending). */
export async function continueRun(id: string, body: ContinueRequest): Promise<RunDetail> {
  return await unwrap(api.POST("/api/v1/runs/{id}/continue/", { params: { path: { id } }, body }));
}

export async function fetchRunLog(id: string, lines: number): Promise<string[]> {
  const data = await unwrap(
    api.GET("/api/v1/runs/{id}/log/", { params: { path: { id }, query: { lines } } }),
  );
  return data.lines;
}
