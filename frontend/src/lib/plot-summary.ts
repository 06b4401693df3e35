import type { Data } from "plotly.js";

const num = (v: unknown): string =>
  typeof v === "number" && Number.isFinite(v)
    ? Math.abs(v) !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e6)
      ? v.toExponential(3)
      : String(Number(v.toPrecision(4)))
    : String(v);

/**
 * The plot in words, for screen readers (its text alternative): per trace its name, how many
 * points, the x range and the last value, or the size of a heatmap's grid.
 */
export function describeTraces(data: Data[], limit = 12): string {
  const parts: string[] = [];
  for (const trace of data.slice(0, limit)) {
    const t = trace as {
      type?: string;
      name?: string;
      x?: ArrayLike<unknown>;
      y?: ArrayLike<unknown>;
      z?: ArrayLike<ArrayLike<unknown>>;
    };
    const name = t.name || "series";
    // a heat map's z is its grid; a 3-D scatter's, a value per point
    if (t.z && t.type !== "scatter3d") {
      parts.push(`${name}: a grid of ${t.z.length} rows`);
      continue;
    }
    const xs = Array.from(t.x ?? []);
    const ys = Array.from(t.y ?? []);
    if (!xs.length) {
      parts.push(`${name}: no points yet`);
      continue;
    }
    const numeric = xs.filter((v): v is number => typeof v === "number");
    const range = numeric.length
      ? `x from ${num(Math.min(...numeric))} to ${num(Math.max(...numeric))}`
      : `${xs.length} categories`;
    const last = [...ys].reverse().find((v) => v !== null && v !== undefined);
    parts.push(
      `${name}: ${xs.length} ${xs.length === 1 ? "point" : "points"}, ${range}` +
        (last !== undefined ? `, last value ${num(last)}` : ""),
    );
  }
  if (data.length > limit) parts.push(`and ${data.length - limit} more series`);
  return parts.length ? `${parts.join("; ")}.` : "No data yet.";
}
