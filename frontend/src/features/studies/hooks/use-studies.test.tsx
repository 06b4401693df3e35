import { waitFor } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { mockApi, renderHookWithApp } from "@/test/render";
import { useStudyRuns } from "./use-studies";

describe("useStudyRuns", () => {
  it("loads every page of a large study (1000 runs per request)", async () => {
    const total = 2500;
    const { calls } = mockApi({
      "GET /api/v1/studies/s1/runs/": (url) => {
        const page = Number(url.searchParams.get("page"));
        const size = Number(url.searchParams.get("page_size"));
        const start = (page - 1) * size;
        const results = Array.from(
          { length: Math.max(0, Math.min(size, total - start)) },
          (_, i) => ({
            id: `r${start + i}`,
            index: start + i,
            state: "completed",
            parameters: {},
            objectives: {},
          }),
        );
        return { count: total, next: null, previous: null, results };
      },
    });
    const { result } = renderHookWithApp(() => useStudyRuns("s1", { active: false }));
    await waitFor(() => expect(result.current.data).toHaveLength(total));
    expect(result.current.data!.map((r) => r.index)).toEqual(
      Array.from({ length: total }, (_, i) => i),
    );
    expect(calls.map((c) => c.url.searchParams.get("page"))).toEqual(["1", "2", "3"]);
    expect(calls[0]!.url.searchParams.get("page_size")).toBe("1000");
  });
});
