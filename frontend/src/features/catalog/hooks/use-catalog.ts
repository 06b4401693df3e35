import { useQuery } from "@tanstack/react-query";
import { fetchBackends, fetchPackages, fetchTemplates } from "../api/catalog";

// The catalog changes when an operator syncs it: minutes of staleness are fine.
const CATALOG_STALE = 5 * 60_000;

export function useTemplates() {
  return useQuery({ queryKey: ["templates"], queryFn: fetchTemplates, staleTime: CATALOG_STALE });
}

export function usePackages() {
  return useQuery({ queryKey: ["packages"], queryFn: fetchPackages, staleTime: CATALOG_STALE });
}

export function useBackends() {
  return useQuery({ queryKey: ["backends"], queryFn: fetchBackends, staleTime: CATALOG_STALE });
}
