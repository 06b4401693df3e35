import { useCallback } from "react";
import { useSearchParams } from "react-router";

/**
 * A function that changes some of the page's URL query parameters in place (no new history
 * entry): a value sets one, null or "" removes it, the others stay.
 */
export function usePatchSearchParams(): (patch: Record<string, string | null>) => void {
  const [, setParams] = useSearchParams();
  return useCallback(
    (patch) =>
      setParams(
        (p) => {
          const next = new URLSearchParams(p);
          for (const [k, v] of Object.entries(patch)) {
            if (v) next.set(k, v);
            else next.delete(k);
          }
          return next;
        },
        { replace: true },
      ),
    [setParams],
  );
}
