import { describe, expect, it } from "vitest";
import {
  describeRunFilter,
  runQueryFromSearch,
  runQueryToApi,
  runQueryToSearch,
} from "./run-query";

describe("run queries", () => {
  it("read the URL, keep unknown keys, and go back to page 1 when a filter changes", () => {
    const url = new URLSearchParams(
      "obj=Cl&state=running,bogus&range=param.aoa:2..8&range=objective.Cl:0.5..&sort=-objective.Cl&page=3",
    );
    const q = runQueryFromSearch(url);
    expect(q).toMatchObject({ state: ["running"], ordering: "-objective.Cl", page: 3 });
    expect(q.ranges).toEqual([
      { column: "param.aoa", low: 2, high: 8 },
      { column: "objective.Cl", low: 0.5, high: null },
    ]);
    expect(runQueryToApi(q)).toMatchObject({
      state: ["running"],
      param: ["aoa:2..8"],
      objective: ["Cl:0.5.."],
      ordering: "-objective.Cl",
      page: 3,
      page_size: 100,
    });
    const next = runQueryToSearch(url, { trust: ["diverged"] });
    expect(next.get("obj")).toBe("Cl");
    expect(next.get("trust")).toBe("diverged");
    expect(next.get("page")).toBeNull();
    expect(runQueryToSearch(url, { page: 4 }).get("page")).toBe("4");
  });
});

describe("describeRunFilter", () => {
  it("says the filter the plot and the table share, in words", () => {
    expect(
      describeRunFilter({
        state: ["completed"],
        trust: ["converged", "iteration_limit"],
        ranges: [
          { column: "param.aoa", low: 2, high: 8 },
          { column: "objective.Cl", low: 0.5, high: null },
          { column: "param.U", low: null, high: 30 },
        ],
      }),
    ).toBe("state completed · trust converged, iteration_limit · aoa 2 to 8 · Cl ≥ 0.5 · U ≤ 30");
    expect(describeRunFilter({ state: [], trust: [], ranges: [] })).toBe("");
  });
});
