import type { Data } from "plotly.js";
import { decimate } from "@/lib/decimate";

/**
 * A recorded series as a Plotly line, thinned to at most `maxPoints` points (the plots stay
 * responsive however long the run); `extra` sets what differs (hover text, axis, dash).
 */
export function lineTrace(
  name: string,
  series: { x: readonly number[]; y: readonly (number | null)[] },
  maxPoints: number,
  extra: Record<string, unknown> = {},
): Data {
  const d = decimate(series.x, series.y, maxPoints);
  return {
    type: "scattergl",
    mode: "lines",
    name,
    x: d.x,
    y: d.y,
    line: { width: 1.6 },
    ...extra,
  } as Data;
}
