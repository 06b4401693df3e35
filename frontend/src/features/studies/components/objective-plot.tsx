import { Group, SegmentedControl, Select, Stack, Text } from "@mantine/core";
import type { Data } from "plotly.js";
import { useMemo } from "react";
import { Plot } from "@/components/plot";
import { PlotSelect } from "@/components/plot-select";
import { formatInt } from "@/lib/format";
import type { StudyPlot } from "@/lib/types";
import { plotTraces, type ObjectivePlotView } from "../lib/plot-traces";

export type { ObjectivePlotView };

/**
 * Objective vs parameter, drawn from data the server shapes for it: every completed run while
 * there are at most 5,000 (WebGL points), a mean line with a min–max band per x bin beyond,
 * or a heat map of two parameters. Fills in as runs finish.
 */
export function ObjectivePlot({
  plot,
  runCount,
  parameters,
  objectives,
  view,
  onViewChange,
  sampled = false,
  onRunClick,
}: {
  plot: StudyPlot | undefined;
  runCount: number;
  parameters: string[];
  objectives: string[];
  view: ObjectivePlotView;
  onViewChange: (v: ObjectivePlotView) => void;
  sampled?: boolean;
  onRunClick?: (runId: string) => void;
}) {
  const { objective, x, group, mode } = view;
  const data = useMemo<Data[]>(
    () => (plot ? plotTraces(plot, { objective, x, group, sampled }) : []),
    [plot, objective, x, group, sampled],
  );
  const heat = plot?.mode === "heatmap";
  const others = parameters.filter((p) => p !== x && p !== group);
  const layout = useMemo(
    () => ({
      xaxis: { title: { text: x }, zeroline: false },
      yaxis: {
        title: { text: heat ? (group ?? "") : objective },
        zeroline: false,
      },
      showlegend: !!group && !heat,
    }),
    [x, group, heat, objective],
  );

  return (
    <Stack gap="sm">
      <Group gap="sm" wrap="wrap" align="flex-end">
        <PlotSelect
          label="Objective"
          data={objectives}
          value={objective}
          onPick={(v) => onViewChange({ ...view, objective: v })}
          w={140}
        />
        <PlotSelect
          label="versus"
          data={parameters}
          value={x}
          onPick={(v) => onViewChange({ ...view, x: v, group: v === group ? null : group })}
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
          {plot ? `${formatInt(plot.total)} of ${formatInt(runCount)} runs have ${objective}` : "…"}
        </Text>
      </Group>
      <Plot
        data={data}
        layout={layout}
        height={360}
        aria-label={`${objective} versus ${x}`}
        data-testid="objective-plot"
        emptyMessage={
          !plot
            ? undefined
            : runCount === 0
              ? "No runs yet."
              : `Points appear here as runs complete (${objective} is computed when a run ends).`
        }
        onPointClick={(pt) => typeof pt.customdata === "string" && onRunClick?.(pt.customdata)}
      />
      {plot?.mode === "binned" && (
        <Text size="xs" c="dimmed" data-testid="objective-binned">
          {formatInt(plot.total)} runs are more than the plot draws one by one: each point is the
          mean over a bin of {x}, the band its minimum and maximum.
        </Text>
      )}
      {others.length > 0 && (
        <Text size="xs" c="dimmed">
          {others.join(", ")} also vary
          {heat ? ": cells average over them" : ": their values share these lines"}.
        </Text>
      )}
    </Stack>
  );
}
