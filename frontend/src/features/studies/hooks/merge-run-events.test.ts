import { describe, expect, it } from "vitest";
import type { Run } from "@/lib/types";
import { mergeRunEvents } from "./use-studies";

describe("mergeRunEvents", () => {
  it("updates the changed runs in place and keeps the others as they were", () => {
    const runs = [
      { id: "a", index: 0, state: "running", objectives: {} },
      { id: "b", index: 1, state: "pending", objectives: {} },
    ] as unknown as Run[];
    const merged = mergeRunEvents(runs, [
      { id: "a", state: "completed", objectives: { Cl: 0.5 }, trust: "converged" },
    ]);
    expect(merged[0]).toMatchObject({
      id: "a",
      index: 0,
      state: "completed",
      trust: "converged",
      objectives: { Cl: 0.5 },
    });
    expect(merged[1]).toBe(runs[1]); // untouched rows keep their identity (no re-render)
  });
});
