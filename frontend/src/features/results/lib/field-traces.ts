import type { Data } from "plotly.js";
import type { Run, Scalar } from "@/lib/types";
import type { FieldGrid, RunFieldData, SurfaceCp } from "../api/results";

/** The grid's coordinates along x and y. */
export function gridAxes(grid: FieldGrid): { x: number[]; y: number[] } {
  return {
    x: Array.from({ length: grid.nx }, (_, i) => grid.x0 + i * grid.dx),
    y: Array.from({ length: grid.ny }, (_, j) => grid.y0 + j * grid.dy),
  };
}

/**
 * The axes of a field plot: exactly the region's extent, one unit of x as long as one of y
 * (the mesh's aspect ratio kept, whatever the plot's box: Plotly narrows the drawing area
 * instead of stretching the mesh or padding it with empty range), and a zoom kept only
 * within one run's region (`revision`: another region or run starts unzoomed).
 */
export function fieldLayout(
  grid: FieldGrid,
  { axes = ["x", "y"], revision = "" }: { axes?: string[]; revision?: string } = {},
) {
  const x1 = grid.x0 + grid.dx * (grid.nx - 1);
  const y1 = grid.y0 + grid.dy * (grid.ny - 1);
  return {
    uirevision: `${revision}:${grid.name}`,
    xaxis: {
      title: { text: axes[0] ?? "" },
      range: [grid.x0, x1],
      constrain: "domain" as const,
      zeroline: false,
      showgrid: false,
    },
    yaxis: {
      title: { text: axes[1] ?? "" },
      range: [grid.y0, y1],
      constrain: "domain" as const,
      scaleanchor: "x" as const,
      scaleratio: 1,
      zeroline: false,
      showgrid: false,
    },
  };
}

/** Row-major values (nx per row, y upwards) as the rows a Plotly heat map takes. */
export function gridRows(values: (number | null)[], grid: FieldGrid): (number | null)[][] {
  const rows: (number | null)[][] = [];
  for (let j = 0; j < grid.ny; j++) rows.push(values.slice(j * grid.nx, (j + 1) * grid.nx));
  return rows;
}

/** The colour range shared by several runs' values of one field (nulls left out). */
export function sharedRange(datas: (RunFieldData | undefined)[]): [number, number] | null {
  let lo = Infinity;
  let hi = -Infinity;
  for (const d of datas)
    for (const v of d?.values ?? [])
      if (v !== null && Number.isFinite(v)) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
  return lo <= hi ? [lo, hi] : null;
}

export function fieldTraces(
  data: RunFieldData,
  {
    range,
    showScale = true,
    axes = ["x", "y"],
    scaleBelow = false,
  }: {
    range?: [number, number] | null;
    showScale?: boolean;
    axes?: string[];
    /** a horizontal colour bar under the plot (small panels side by side keep their width) */
    scaleBelow?: boolean;
  } = {},
): Data[] {
  const { x, y } = gridAxes(data.region);
  const [ax, ay] = axes;
  const heat: Data = {
    type: "heatmap",
    x,
    y,
    z: gridRows(data.values, data.region),
    zmin: range?.[0],
    zmax: range?.[1],
    colorscale: "Viridis",
    showscale: showScale,
    colorbar: scaleBelow
      ? { orientation: "h", thickness: 8, y: -0.38, len: 0.9, title: { text: "" } }
      : { title: { text: data.label }, thickness: 12 },
    hoverongaps: false,
    name: data.label,
    hovertemplate: `${ax} %{x:.4g}<br>${ay} %{y:.4g}<br>${data.label} %{z:.4g}<extra></extra>`,
  };
  const outline: Data = {
    type: "scatter",
    mode: "lines",
    x: data.outline.x,
    y: data.outline.y,
    line: { color: "#212529", width: 1.5 },
    hoverinfo: "skip",
    showlegend: false,
    name: "walls",
  };
  return data.outline.x.length ? [heat, outline] : [heat];
}

/** Cp against x/c, upper and lower sides apart (faces facing -y and +y). */
export function cpTraces(cp: SurfaceCp): Data[] {
  return (["upper", "lower"] as const).flatMap((side) => {
    const idx = cp.side.map((s, i) => (s === side ? i : -1)).filter((i) => i >= 0);
    if (!idx.length) return [];
    return [
      {
        type: "scatter",
        mode: "markers",
        name: side === "upper" ? "upper side" : "lower side",
        x: idx.map((i) => cp.x_over_c[i] ?? null),
        y: idx.map((i) => cp.cp[i] ?? null),
        text: idx.map((i) => cp.patch[i] ?? ""),
        marker: { size: 5 },
        hovertemplate: "x/c %{x:.3f}<br>Cp %{y:.3f}<br>%{text}<extra></extra>",
      } satisfies Data,
    ];
  });
}

/** The runs that have both objectives, as one scatter coloured by a parameter. */
export function polarTraces(
  runs: Run[],
  { x, y, colour }: { x: string; y: string; colour: string | null },
): Data[] {
  const points = runs.filter(
    (r) => Number.isFinite(r.objectives[x]) && Number.isFinite(r.objectives[y]),
  );
  if (!points.length) return [];
  const colours = colour ? points.map((r) => r.parameters[colour]) : [];
  const numeric = colours.every((c) => typeof c === "number");
  const label = (r: Run) =>
    `run #${r.index}<br>` +
    Object.entries(r.parameters)
      .map(([k, v]) => `${k} = ${fmt(v)}`)
      .join("<br>");
  return [
    {
      type: "scatter",
      mode: "markers",
      x: points.map((r) => r.objectives[x] ?? null),
      y: points.map((r) => r.objectives[y] ?? null),
      customdata: points.map((r) => r.id),
      text: points.map(label),
      hovertemplate: `%{text}<br>${x} %{x:.4g}<br>${y} %{y:.4g}<extra></extra>`,
      marker: {
        size: 9,
        color: colour && numeric ? (colours as number[]) : undefined,
        colorscale: "Viridis",
        showscale: !!colour && numeric,
        colorbar: colour ? { title: { text: colour }, thickness: 12 } : undefined,
        line: { width: 1, color: "#fff" },
      },
      name: `${y} vs ${x}`,
    } satisfies Data,
  ];
}

function fmt(v: Scalar): string {
  return typeof v === "number" ? String(Number(v.toPrecision(5))) : String(v);
}

/** The query string of the compare view: 2 to 6 distinct run ids. */
export const COMPARE_MIN = 2;
export const COMPARE_MAX = 6;
export function compareHref(ids: string[]): string | null {
  const unique = [...new Set(ids)];
  if (unique.length < COMPARE_MIN || unique.length > COMPARE_MAX) return null;
  return `/compare?runs=${unique.join(",")}`;
}
