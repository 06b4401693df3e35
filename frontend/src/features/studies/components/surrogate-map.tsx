import { Grid, Group, Stack, Text } from "@mantine/core";
import { useMemo } from "react";
import { Plot } from "@/components/plot";
import { PlotSelect } from "@/components/plot-select";
import { formatInt, formatNumber } from "@/lib/format";
import type { StudySurrogate } from "@/lib/types";
import { adaptiveProgressText, surrogateTraces } from "../lib/surrogate-traces";

/**
 * An adaptive study's Gaussian-process surrogate filling in: the mean of an objective over two
 * parameters and its uncertainty (standard deviation) side by side, the runs' points on both,
 * and how far the batches have gone ("batch 3 of ≤ 8, 24 of 40 runs").
 */
export function SurrogateMap({
  surrogate,
  objective,
  onObjectiveChange,
  axes,
  onAxesChange,
}: {
  surrogate: StudySurrogate | undefined;
  objective: string;
  onObjectiveChange: (objective: string) => void;
  axes: { x: string | null; y: string | null };
  onAxesChange: (axes: { x: string; y: string }) => void;
}) {
  const objectives = surrogate?.progress.objectives ?? [];
  const shown = objectives.includes(objective) ? objective : (objectives[0] ?? "");
  const mean = useMemo(
    () => (surrogate ? surrogateTraces(surrogate, shown, "mean") : []),
    [surrogate, shown],
  );
  const std = useMemo(
    () => (surrogate ? surrogateTraces(surrogate, shown, "std") : []),
    [surrogate, shown],
  );
  const grid = surrogate?.grid;
  const names = surrogate?.parameters.map((p) => p.name) ?? [];
  const x = grid?.x ?? axes.x ?? names[0] ?? "";
  const y = grid?.y ?? axes.y ?? names[1] ?? "";
  const layout = useMemo(
    () => ({
      xaxis: { title: { text: x }, zeroline: false },
      yaxis: { title: { text: y }, zeroline: false },
      showlegend: false,
    }),
    [x, y],
  );
  const fixed = Object.entries(grid?.fixed ?? {});
  const empty = !surrogate
    ? undefined
    : "The map appears when the first runs complete with objective values.";

  return (
    <Stack gap="sm">
      <Group gap="sm" wrap="wrap" align="flex-end">
        <PlotSelect
          label="Objective"
          data={objectives}
          value={shown || null}
          onPick={(v) => onObjectiveChange(v)}
          w={140}
        />
        {names.length > 2 && (
          <>
            <PlotSelect
              label="x"
              data={names.filter((n) => n !== y)}
              value={x}
              onPick={(v) => onAxesChange({ x: v, y })}
              w={130}
            />
            <PlotSelect
              label="y"
              data={names.filter((n) => n !== x)}
              value={y}
              onPick={(v) => onAxesChange({ x, y: v })}
              w={130}
            />
          </>
        )}
        <Text size="sm" ml="auto" data-testid="adaptive-progress">
          {surrogate ? adaptiveProgressText(surrogate.progress) : "…"}
        </Text>
      </Group>
      <Grid gutter="md">
        <Grid.Col span={{ base: 12, md: 6 }}>
          <Text size="xs" fw={600} mb={4}>
            {shown}: the surrogate&apos;s mean
          </Text>
          <Plot
            data={mean}
            layout={layout}
            height={320}
            aria-label={`surrogate mean of ${shown} over ${x} and ${y}`}
            data-testid="surrogate-mean"
            emptyMessage={empty}
          />
        </Grid.Col>
        <Grid.Col span={{ base: 12, md: 6 }}>
          <Text size="xs" fw={600} mb={4}>
            {shown}: its uncertainty (standard deviation)
          </Text>
          <Plot
            data={std}
            layout={layout}
            height={320}
            aria-label={`surrogate uncertainty of ${shown} over ${x} and ${y}`}
            data-testid="surrogate-std"
            emptyMessage={empty}
          />
        </Grid.Col>
      </Grid>
      <Text size="xs" c="dimmed">
        {surrogate
          ? `${formatInt(surrogate.observed?.[shown] ?? 0)} completed runs feed the map; circles are runs, ringed the latest batch.`
          : ""}
        {fixed.length > 0 &&
          ` ${fixed.map(([k, v]) => `${k} = ${formatNumber(v)}`).join(", ")} (mid-range) elsewhere.`}
      </Text>
    </Stack>
  );
}
