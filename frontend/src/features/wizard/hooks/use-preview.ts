import { useDebouncedValue } from "@mantine/hooks";
import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useMemo } from "react";
import type { StudySpec } from "@/lib/types";
import { createStudy, previewSpec, submitStudy, updateStudy } from "../api/wizard";

/**
 * What the spec would make (run count, first rows, quota impact), asked of the server as the
 * user types, debounced. The server is the validator of record; its `field` errors land on
 * the matching input.
 */
export function usePreview(spec: StudySpec, enabled: boolean) {
  // `spec` changes only when the form does (the wizard memoises it); the query key hashes the
  // spec's content, so an edit that leaves the spec as it was asks nothing new
  const body = useMemo(() => ({ ...spec, name: spec.name || "preview" }), [spec]);
  const [debounced] = useDebouncedValue(body, 350);
  return useQuery({
    queryKey: ["preview", debounced],
    queryFn: ({ signal }) => previewSpec(debounced, signal),
    enabled,
    placeholderData: keepPreviousData,
    staleTime: 10_000,
    retry: false,
  });
}

export function useSaveStudy(editId: string | null) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: async ({ spec, draft }: { spec: StudySpec; draft: boolean }) => {
      if (editId) {
        const saved = await updateStudy(editId, spec);
        return draft ? saved : submitStudy(editId);
      }
      return createStudy(spec, draft);
    },
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ["studies"] });
      void qc.invalidateQueries({ queryKey: ["quota"] });
    },
  });
}
