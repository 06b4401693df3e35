import { describe, expect, it } from "vitest";
import { splitParameters } from "./spec";

describe("splitParameters", () => {
  it("tells varied parameters from fixed ones", () => {
    expect(
      splitParameters({
        name: "s",
        parameters: {
          aoa: { values: [0, 4, 8] },
          iterations: { value: 60 },
          speed: { values: [26] },
          nu: { range: [1, 3, 1] },
        },
      }),
    ).toEqual({
      varied: ["aoa", "nu"],
      fixed: [
        ["iterations", 60],
        ["speed", 26],
      ],
    });
  });
});
