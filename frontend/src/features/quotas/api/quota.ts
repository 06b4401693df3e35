import { api, unwrap } from "@/lib/api-client";
import type { QuotaSnapshot } from "@/lib/types";

export async function fetchQuota(): Promise<QuotaSnapshot> {
  return await unwrap(api.GET("/api/v1/quota/"));
}
