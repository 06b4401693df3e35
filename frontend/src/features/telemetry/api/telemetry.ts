import { api, unwrap } from "@/lib/api-client";
import type { Telemetry } from "@/lib/types";

export async function fetchTelemetry(
  runId: string,
  series: string[],
  maxPoints: number,
  signal?: AbortSignal,
): Promise<Telemetry> {
  const data = await unwrap(
    api.GET("/api/v1/runs/{id}/telemetry/", {
      params: {
        path: { id: runId },
        query: { series: series.join(",") || undefined, max_points: maxPoints },
      },
      signal,
    }),
  );
  return data;
}
