import { describe, expect, it } from "vitest";
import type { Run } from "@/lib/types";
import type { RunFieldData } from "../api/results";
import { compareHref, cpTraces, gridRows, polarTraces, sharedRange } from "./field-traces";

const grid = { name: "domain", x0: 0, y0: 0, dx: 1, dy: 1, nx: 3, ny: 2 };
const field = (values: (number | null)[]): RunFieldData => ({
  run: "r",
  field: "p",
  label: "p",
  dimensions: "0 2 -2 0 0 0 0",
  region: grid,
  values,
  min: null,
  max: null,
  outline: { x: [], y: [] },
});

const run = (
  id: string,
  index: number,
  parameters: Run["parameters"],
  objectives: Run["objectives"],
) => ({ id, index, parameters, objectives, state: "completed" }) as unknown as Run;

describe("field traces", () => {
  it("cuts row-major values into rows of nx", () => {
    expect(gridRows([1, 2, 3, 4, null, 6], grid)).toEqual([
      [1, 2, 3],
      [4, null, 6],
    ]);
  });

  it("shares one colour range across runs, ignoring the holes of the mesh", () => {
    expect(sharedRange([field([1, null, 3, 4, 5, 6]), field([-2, 0, null, 9, 1, 1])])).toEqual([
      -2, 9,
    ]);
    expect(sharedRange([field([null, null, null, null, null, null])])).toBeNull();
  });

  it("splits Cp into the upper and lower sides", () => {
    const traces = cpTraces({
      patches: ["walls"],
      reference: { text: "", magUInf: 1, rhoInf: null, pRef: 0, lRef: 1, chord: 1 },
      x_over_c: [0, 0.5, 1, 0.5],
      cp: [1, -0.5, 0.1, 0.2],
      side: ["lower", "upper", "lower", "lower"],
      patch: ["walls", "walls", "walls", "walls"],
    }) as { name: string; x: number[]; y: number[] }[];
    expect(traces.map((t) => [t.name, t.x, t.y])).toEqual([
      ["upper side", [0.5], [-0.5]],
      ["lower side", [0, 1, 0.5], [1, 0.1, 0.2]],
    ]);
  });

  it("plots runs that have both objectives, coloured by a parameter, naming each run", () => {
    const runs = [
      run("a", 1, { aoa: 0 }, { Cl: 0.1, Cd: 0.01 }),
      run("b", 2, { aoa: 4 }, { Cl: 0.5, Cd: null }),
      run("c", 3, { aoa: 8 }, { Cl: 0.9, Cd: 0.03 }),
    ];
    const [trace] = polarTraces(runs, { x: "Cd", y: "Cl", colour: "aoa" }) as {
      x: number[];
      y: number[];
      customdata: string[];
      text: string[];
      marker: { color: number[] };
    }[];
    expect(trace!.x).toEqual([0.01, 0.03]);
    expect(trace!.y).toEqual([0.1, 0.9]);
    expect(trace!.customdata).toEqual(["a", "c"]);
    expect(trace!.marker.color).toEqual([0, 8]);
    expect(trace!.text[1]).toContain("run #3");
    expect(polarTraces(runs.slice(1, 2), { x: "Cd", y: "Cl", colour: null })).toEqual([]);
  });

  it("opens the compare view for 2 to 6 distinct runs only", () => {
    expect(compareHref(["a"])).toBeNull();
    expect(compareHref(["a", "a"])).toBeNull();
    expect(compareHref(["a", "b"])).toBe("/compare?runs=a,b");
    expect(compareHref(["1", "2", "3", "4", "5", "6", "7"])).toBeNull();
  });
});
