import type { components } from "@/generated/api";
import { api, unwrap } from "@/lib/api-client";

type Schemas = components["schemas"];

export type ApiToken = Schemas["ApiToken"];
export type NewApiToken = Schemas["NewApiToken"];
export type ApiTokenCreate = Schemas["ApiTokenCreateRequest"];

export const tokensQueryKey = ["tokens"] as const;

export function fetchTokens(): Promise<ApiToken[]> {
  return unwrap(api.GET("/api/v1/tokens/"));
}

export function createToken(body: ApiTokenCreate): Promise<NewApiToken> {
  return unwrap(api.POST("/api/v1/tokens/", { body }));
}

export async function revokeToken(id: number): Promise<void> {
  await unwrap(api.DELETE("/api/v1/tokens/{id}/", { params: { path: { id } } }));
}
