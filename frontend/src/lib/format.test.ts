import { describe, expect, it } from "vitest";
import { formatBytes, formatCoreHoursRange, formatDuration, formatNumber, plural } from "./format";

describe("format", () => {
  it("says an estimate's range of core-hours as one figure", () => {
    expect(formatCoreHoursRange([0.0833, 0.1667])).toBe("0.083–0.17 core-h");
    expect(formatCoreHoursRange([2, 2])).toBe("2 core-h");
    expect(formatCoreHoursRange([12.34, 250.2])).toBe("12.3–250.2 core-h");
  });

  it("says durations the way people read them", () => {
    expect(formatDuration(9.26)).toBe("9.3 s");
    expect(formatDuration(75)).toBe("1 min 15 s");
    expect(formatDuration(3725)).toBe("1 h 2 min");
    expect(formatDuration(null)).toBe("—");
  });

  it("keeps measured values short and honest", () => {
    expect(formatNumber(0.0129026)).toMatch(/0[.,]0129/);
    expect(formatNumber(1e-6)).toBe("1.000e-6");
    expect(formatNumber(undefined)).toBe("—");
    expect(formatNumber("kOmegaSST")).toBe("kOmegaSST");
  });

  it("formats sizes and counts", () => {
    expect(formatBytes(824_478)).toBe("824 kB");
    expect(plural(1, "run")).toBe("1 run");
    expect(plural(3, "run")).toBe("3 runs");
  });
});
