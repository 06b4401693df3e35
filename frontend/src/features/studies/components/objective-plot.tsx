import { Group, SegmentedControl, Select, Stack, Text } from "@mantine/core";
import type { Data } from "plotly.js";
import { useMemo } from "react";
import { Plot } from "@/components/plot";
import type { Run, Scalar } from "@/lib/types";

export interface ObjectivePlotView {
  objective: string;
  x: string;
  group: string | null;
  mode: "lines" | "heatmap";
}

function numeric(v: Scalar | null | undefined): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** Objective vs parameter: fills in as runs finish. */
export function ObjectivePlot({
  runs,
  parameters,
  objectives,
  view,
  onViewChange,
  sampled = false,
  onRunClick,
}: {
  runs: Run[];
  parameters: string[];
  objectives: string[];
  view: ObjectivePlotView;
  onViewChange: (v: ObjectivePlotView) => void;
  sampled?: boolean;
  onRunClick?: (runId: string) => void;
}) {
  const { objective, x, group, mode } = view;
  const done = useMemo(
    () =>
      runs.filter(
        (r) => r.state === "completed" && numeric(r.objectives?.[objective] ?? null) !== null,
      ),
    [runs, objective],
  );

  const data = useMemo<Data[]>(() => {
    const point = (r: Run) => ({
      x: r.parameters[x],
      y: r.objectives[objective] as number,
      id: r.id,
      index: r.index,
    });
    if (group && mode === "heatmap") {
      const xs = [...new Set(done.map((r) => r.parameters[x]))].sort(sortScalar);
      const gs = [...new Set(done.map((r) => r.parameters[group]))].sort(sortScalar);
      const sum = new Map<string, { s: number; n: number }>();
      for (const r of done) {
        const k = `${r.parameters[x]}|${r.parameters[group]}`;
        const acc = sum.get(k) ?? { s: 0, n: 0 };
        acc.s += r.objectives[objective] as number;
        acc.n += 1;
        sum.set(k, acc);
      }
      const z = gs.map((g) =>
        xs.map((xv) => {
          const acc = sum.get(`${xv}|${g}`);
          return acc ? acc.s / acc.n : null;
        }),
      );
      return [
        {
          type: "heatmap",
          x: xs as (string | number)[],
          y: gs as (string | number)[],
          z: z as (number | null)[][],
          colorscale: "Viridis",
          colorbar: { title: { text: objective }, thickness: 12 },
          hovertemplate: `${x}=%{x}<br>${group}=%{y}<br>${objective}=%{z:.4g}<extra></extra>`,
        } as Data,
      ];
    }
    const groups = new Map<string, ReturnType<typeof point>[]>();
    for (const r of done) {
      const key = group ? `${group} = ${r.parameters[group]}` : objective;
      const list = groups.get(key) ?? [];
      list.push(point(r));
      groups.set(key, list);
    }
    const keys = [...groups.keys()].sort((a, b) =>
      a.localeCompare(b, undefined, { numeric: true }),
    );
    return keys.map((key) => {
      const pts = groups.get(key)!.sort((a, b) => sortScalar(a.x, b.x));
      return {
        type: "scatter",
        mode: sampled ? "markers" : "lines+markers",
        name: key,
        x: pts.map((p) => p.x) as (number | string)[],
        y: pts.map((p) => p.y),
        customdata: pts.map((p) => p.id),
        text: pts.map((p) => `run ${p.index}`),
        hovertemplate: `%{text}<br>${x}=%{x}<br>${objective}=%{y:.5g}<extra>${group ? key : ""}</extra>`,
        marker: { size: 7 },
        line: { width: 2 },
      } as Data;
    });
  }, [done, x, group, mode, objective, sampled]);

  const others = parameters.filter((p) => p !== x && p !== group);
  const layout = useMemo(
    () => ({
      xaxis: { title: { text: x }, zeroline: false, gridcolor: "#e9ecef" },
      yaxis: {
        title: { text: group && mode === "heatmap" ? group : objective },
        zeroline: false,
        gridcolor: "#e9ecef",
      },
      showlegend: !!group && mode === "lines",
    }),
    [x, group, mode, objective],
  );

  return (
    <Stack gap="sm">
      <Group gap="sm" wrap="wrap" align="flex-end">
        <Select
          size="xs"
          label="Objective"
          data={objectives}
          value={objective}
          onChange={(v) => v && onViewChange({ ...view, objective: v })}
          allowDeselect={false}
          w={140}
        />
        <Select
          size="xs"
          label="versus"
          data={parameters}
          value={x}
          onChange={(v) => v && onViewChange({ ...view, x: v, group: v === group ? null : group })}
          allowDeselect={false}
          w={140}
        />
        {parameters.length > 1 && (
          <Select
            size="xs"
            label="one line per"
            placeholder="(none)"
            data={parameters.filter((p) => p !== x)}
            value={group}
            onChange={(v) => onViewChange({ ...view, group: v })}
            clearable
            w={150}
          />
        )}
        {group && (
          <SegmentedControl
            size="xs"
            value={mode}
            onChange={(v) => onViewChange({ ...view, mode: v as ObjectivePlotView["mode"] })}
            data={[
              { value: "lines", label: "Lines" },
              { value: "heatmap", label: "Heat map" },
            ]}
            aria-label="Plot type"
          />
        )}
        <Text size="xs" c="dimmed" ml="auto" data-testid="objective-count">
          {done.length} of {runs.length} runs have {objective}
        </Text>
      </Group>
      <Plot
        data={data}
        layout={layout}
        height={360}
        aria-label={`${objective} versus ${x}`}
        data-testid="objective-plot"
        emptyMessage={
          runs.length === 0
            ? "No runs yet."
            : `Points appear here as runs complete (${objective} is computed when a run ends).`
        }
        onPointClick={(p) => typeof p.customdata === "string" && onRunClick?.(p.customdata)}
      />
      {others.length > 0 && (
        <Text size="xs" c="dimmed">
          {others.join(", ")} also vary
          {mode === "heatmap" ? ": cells average over them" : ": their values share these lines"}.
        </Text>
      )}
    </Stack>
  );
}

function sortScalar(a: Scalar | undefined, b: Scalar | undefined): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}
