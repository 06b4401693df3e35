import { describe, expect, it } from "vitest";
import { decimate } from "./decimate";

describe("decimate", () => {
  it("leaves short series alone", () => {
    expect(decimate([1, 2, 3], [4, 5, 6], 10)).toEqual({ x: [1, 2, 3], y: [4, 5, 6] });
  });

  it("caps a long series, keeps its ends and its spikes", () => {
    const n = 100_000;
    const x = Array.from({ length: n }, (_, i) => i);
    const y = x.map((i) => (i === 54_321 ? 1e3 : Math.exp(-i / 10_000)));
    const d = decimate(x, y, 1000);
    expect(d.x.length).toBeLessThanOrEqual(1000);
    expect(d.x[0]).toBe(0);
    expect(d.x.at(-1)).toBe(n - 1);
    expect(d.y).toContain(1e3); // a residual blow-up must not vanish from the plot
    expect([...d.x].sort((a, b) => a - b)).toEqual(d.x); // still in x order
  });

  it("keeps a gap where the solver wrote NaN, so a divergence stays visible", () => {
    const n = 50_000;
    const x = Array.from({ length: n }, (_, i) => i);
    const y = x.map((i) => (i === 40_000 ? null : 1 / (i + 1)));
    const d = decimate(x, y, 500);
    expect(d.x.length).toBeLessThanOrEqual(750);
    expect(d.y).toContain(null);
    expect(d.x[d.y.indexOf(null)]).toBe(40_000);
    expect([...d.x].sort((a, b) => a - b)).toEqual(d.x);
  });
});
