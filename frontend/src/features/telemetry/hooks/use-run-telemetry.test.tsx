import { waitFor } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { mockApi, renderHookWithApp } from "@/test/render";
import { useRunTelemetry } from "./use-run-telemetry";

const pick = (available: string[]) => available.filter((n) => n.startsWith("residual."));

describe("useRunTelemetry", () => {
  it("asks for the series it picks from what the run has", async () => {
    const { calls } = mockApi({
      "GET /api/v1/runs/r1/telemetry/": (url) => {
        const names = (url.searchParams.get("series") ?? "").split(",").filter(Boolean);
        return {
          run: "r1",
          attempt: 1,
          available: ["cpu.percent", "residual.Ux", "residual.p"],
          series: Object.fromEntries(
            names.map((n) => [n, { x: [1, 2], y: [1, 0.5], points: 2, returned: 2 }]),
          ),
        };
      },
    });
    const { result } = renderHookWithApp(() =>
      useRunTelemetry("r1", { pick, pickKey: "residuals", active: false, maxPoints: 500 }),
    );
    await waitFor(() =>
      expect(Object.keys(result.current.data?.series ?? {})).toEqual(["residual.Ux", "residual.p"]),
    );
    // first call learns the names, the second fetches them; downsampled on the server
    expect(calls.map((c) => c.url.searchParams.get("series"))).toEqual([
      null,
      "residual.Ux,residual.p",
    ]);
    expect(calls[1]!.url.searchParams.get("max_points")).toBe("500");
  });
});
