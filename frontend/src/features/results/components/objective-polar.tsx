import { Group, Select, Stack, Text } from "@mantine/core";
import { useMemo, useState } from "react";
import { Plot } from "@/components/plot";
import { PlotSelect } from "@/components/plot-select";
import type { Run } from "@/lib/types";
import { polarTraces } from "../lib/field-traces";
import { defaultAxes } from "../lib/pick";

/** One objective against another (a drag polar, Cm vs Cl, …), points coloured by a parameter. */
export function ObjectivePolar({
  runs,
  objectives,
  parameters,
  onRunClick,
}: {
  runs: Run[];
  objectives: string[];
  parameters: string[];
  onRunClick?: (runId: string) => void;
}) {
  const [dx, dy] = defaultAxes(objectives);
  const [x, setX] = useState(dx);
  const [y, setY] = useState(dy);
  const [colour, setColour] = useState<string | null>(parameters[0] ?? null);
  const xs = objectives.includes(x) ? x : dx;
  const ys = objectives.includes(y) ? y : dy;
  const data = useMemo(() => polarTraces(runs, { x: xs, y: ys, colour }), [runs, xs, ys, colour]);
  const count = (data[0] as { x?: unknown[] } | undefined)?.x?.length ?? 0;
  const layout = useMemo(
    () => ({
      xaxis: { title: { text: xs }, zeroline: false },
      yaxis: { title: { text: ys }, zeroline: false },
      showlegend: false,
    }),
    [xs, ys],
  );
  return (
    <Stack gap="sm">
      <Group gap="sm" align="flex-end" wrap="wrap">
        <PlotSelect
          label="Y"
          data={objectives}
          value={ys}
          onPick={(v) => setY(v)}
          w={120}
          data-testid="polar-y"
        />
        <PlotSelect
          label="against X"
          data={objectives}
          value={xs}
          onPick={(v) => setX(v)}
          w={120}
          data-testid="polar-x"
        />
        {parameters.length > 0 && (
          <Select
            size="xs"
            label="colour by"
            placeholder="(none)"
            data={parameters}
            value={colour}
            onChange={setColour}
            clearable
            w={130}
          />
        )}
        <Text size="xs" c="dimmed" ml="auto" data-testid="polar-count">
          {count} of {runs.length} completed runs have both
        </Text>
      </Group>
      <Plot
        data={data}
        layout={layout}
        height={340}
        aria-label={`${ys} against ${xs}`}
        data-testid="polar-plot"
        emptyMessage="Points appear here as runs complete with both objectives."
        onPointClick={(pt) => typeof pt.customdata === "string" && onRunClick?.(pt.customdata)}
      />
    </Stack>
  );
}
