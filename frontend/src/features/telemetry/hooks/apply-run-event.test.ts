import { describe, expect, it } from "vitest";
import type { LiveTelemetry } from "@/lib/live";
import type { Telemetry } from "@/lib/types";
import { applyRunEvent } from "./use-run-telemetry";

/** A run stream's telemetry event, as the server sends it. */
function telemetry(seq: number, series: LiveTelemetry["series"] = {}): LiveTelemetry {
  return { type: "telemetry", id: "r1", seq, attempt: 1, series, log: [] };
}

const pick = (names: string[]) => names.filter((n) => n.startsWith("residual."));
const snapshot: Telemetry = {
  run: "r1",
  attempt: 1,
  last_seq: 10,
  available: ["residual.p"],
  series: { "residual.p": { x: [1, 2], y: [1, 0.5], points: 2, returned: 2 } },
};

describe("applyRunEvent (websocket events on a REST snapshot)", () => {
  it("appends the points of the next event to the picked series", () => {
    const next = applyRunEvent(
      snapshot,
      telemetry(11, {
        "residual.p": [[3, 0.25]],
        "residual.Ux": [[3, 0.1]],
        "cpu.percent": [[0.5, 80]],
      }),
      pick,
      1000,
    );
    expect(next).not.toBe("gap");
    const t = next as Telemetry;
    expect(t.last_seq).toBe(11);
    expect(t.series["residual.p"]!.x).toEqual([1, 2, 3]);
    expect(t.series["residual.Ux"]!.y).toEqual([0.1]); // a new residual joins the plot
    expect(t.series).not.toHaveProperty("cpu.percent"); // not picked
    expect(t.available).toEqual(["cpu.percent", "residual.Ux", "residual.p"]);
  });

  it("ignores events the snapshot already holds and reports a gap", () => {
    expect(applyRunEvent(snapshot, telemetry(10), pick, 1000)).toBeNull();
    expect(applyRunEvent(snapshot, telemetry(13), pick, 1000)).toBe("gap");
  });

  it("advances over state events and skips NaN points", () => {
    const t = applyRunEvent(
      snapshot,
      {
        type: "state",
        id: "r1",
        seq: 11,
        run: { id: "r1", index: 0, state: "running", attempt: 1 },
      },
      pick,
      1000,
    ) as Telemetry;
    expect(t.last_seq).toBe(11);
    const u = applyRunEvent(
      t,
      telemetry(12, {
        "residual.p": [
          [3, null],
          [4, 0.2],
        ],
      }),
      pick,
      1000,
    ) as Telemetry;
    expect(u.series["residual.p"]!.x).toEqual([1, 2, 4]);
  });

  it("keeps a long live series within its point budget", () => {
    const points = Array.from({ length: 5000 }, (_, i) => [i + 3, 1 / (i + 3)] as [number, number]);
    const t = applyRunEvent(
      snapshot,
      telemetry(11, { "residual.p": points }),
      pick,
      1000,
    ) as Telemetry;
    expect(t.series["residual.p"]!.x.length).toBeLessThanOrEqual(1000);
    expect(t.series["residual.p"]!.points).toBe(5002);
  });
});
