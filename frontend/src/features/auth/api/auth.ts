import { api, ensureCsrfCookie, unwrap } from "@/lib/api-client";
import type { Me } from "@/lib/types";

export const meQueryKey = ["me"] as const;

export function fetchMe(): Promise<Me> {
  return unwrap(api.GET("/api/v1/me/"));
}

export async function login(username: string, password: string): Promise<Me> {
  await ensureCsrfCookie();
  return unwrap(api.POST("/api/v1/auth/login/", { body: { username, password } }));
}

export async function logout(): Promise<void> {
  await ensureCsrfCookie();
  await unwrap(api.POST("/api/v1/auth/logout/"));
}
