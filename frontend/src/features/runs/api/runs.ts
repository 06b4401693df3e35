import { api, unwrap } from "@/lib/api-client";
import type { RunDetail } from "@/lib/types";

export async function fetchRun(id: string): Promise<RunDetail> {
  return await unwrap(api.GET("/api/v1/runs/{id}/", { params: { path: { id } } }));
}

export async function cancelRun(id: string): Promise<RunDetail> {
  return await unwrap(api.POST("/api/v1/runs/{id}/cancel/", { params: { path: { id } } }));
}

export async function fetchRunLog(id: string, lines: number): Promise<string[]> {
  const data = await unwrap(
    api.GET("/api/v1/runs/{id}/log/", { params: { path: { id }, query: { lines } } }),
  );
  return data.lines;
}
