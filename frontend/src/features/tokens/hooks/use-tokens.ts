import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import {
  createToken,
  fetchTokens,
  revokeToken,
  tokensQueryKey,
  type ApiTokenCreate,
} from "../api/tokens";

/** The signed-in user's API tokens (never their keys). */
export function useTokens() {
  return useQuery({ queryKey: tokensQueryKey, queryFn: fetchTokens, staleTime: 30_000 });
}

export function useCreateToken() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: ApiTokenCreate) => createToken(body),
    onSuccess: () => qc.invalidateQueries({ queryKey: tokensQueryKey }),
  });
}

export function useRevokeToken() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => revokeToken(id),
    onSuccess: () => qc.invalidateQueries({ queryKey: tokensQueryKey }),
  });
}
