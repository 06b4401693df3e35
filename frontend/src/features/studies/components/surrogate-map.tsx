import {
  Group,
  SegmentedControl,
  Stack,
  Text,
  useComputedColorScheme,
  useMantineTheme,
} from "@mantine/core";
import { useMemo, useState } from "react";
import { Plot } from "@/components/plot";
import { PlotSelect } from "@/components/plot-select";
import { formatInt } from "@/lib/format";
import { AXIS_COLORS } from "@/lib/plot-theme";
import type { ObjectiveSpec, StudySurrogate } from "@/lib/types";
import {
  adaptiveProgressText,
  axisTitle,
  BAND_STD,
  fixedText,
  goalText,
  surrogateDimensions,
  surrogateGap,
  surrogateHeatmap,
  surrogateLine,
  type SurrogateKind,
} from "../lib/surrogate-traces";

const REDUCED: Record<string, string> = {
  last: "last value",
  mean_last: "mean of the last values",
  min: "minimum",
  max: "maximum",
};

/** "last value of returnFlow.min(Ux)" or "Cl / Cd": what an objective is. */
function definition(spec: ObjectiveSpec | undefined): string {
  if (!spec) return "";
  if ("expr" in spec) return spec.expr;
  return `${REDUCED[spec.reduce ?? "last"] ?? spec.reduce} of ${spec.series}`;
}

/**
 * An adaptive study's Gaussian-process surrogate filling in, batch by batch. One sampled
 * parameter: the objective's mean as a line in a band of ± 2 standard deviations, with the
 * runs' values. Two: a heat map of the mean (or of its uncertainty), the runs on top. More:
 * two chosen parameters, the others at the best run's values. Its title names the objective,
 * what it is and the goal; its axes the parameters with their units.
 */
export function SurrogateMap({
  surrogate,
  objective,
  onObjectiveChange,
  axes,
  onAxesChange,
  objectiveSpecs = {},
}: {
  surrogate: StudySurrogate | undefined;
  objective: string;
  onObjectiveChange: (objective: string) => void;
  axes: { x: string | null; y: string | null };
  onAxesChange: (axes: { x: string; y: string }) => void;
  /** the study's objectives, to say what the shown one is */
  objectiveSpecs?: Record<string, ObjectiveSpec>;
}) {
  const [kind, setKind] = useState<SurrogateKind>("mean");
  const scheme = useComputedColorScheme("light");
  const theme = useMantineTheme();
  const ink = scheme === "dark" ? theme.colors.blue[4] : theme.colors.blue[8];
  const objectives = surrogate?.progress.objectives ?? [];
  const shown = objectives.includes(objective) ? objective : (objectives[0] ?? "");
  const dims = surrogate ? surrogateDimensions(surrogate) : 2;
  const names = surrogate?.parameters.map((p) => p.name) ?? [];
  const grid = surrogate?.grid;
  const x = grid?.x ?? axes.x ?? names[0] ?? "";
  const y = dims === 1 ? "" : (grid?.y ?? axes.y ?? names[1] ?? "");
  const data = useMemo(() => {
    if (!surrogate) return [];
    return dims === 1
      ? surrogateLine(surrogate, shown, ink)
      : surrogateHeatmap(surrogate, shown, kind);
  }, [surrogate, shown, kind, dims, ink]);
  const layout = useMemo(() => {
    const bound = (name: string) => surrogate?.parameters.find((p) => p.name === name);
    const range = (name: string) => {
      const b = bound(name);
      return b ? [b.min, b.max] : undefined;
    };
    const colors = AXIS_COLORS[scheme];
    const title = (name: string) => (surrogate ? axisTitle(surrogate, name) : name);
    return {
      xaxis: { title: { text: title(x) }, zeroline: false, range: range(x), ...colors },
      yaxis:
        dims === 1
          ? { title: { text: shown }, zeroline: false, ...colors }
          : { title: { text: title(y) }, zeroline: false, range: range(y), ...colors },
      showlegend: dims === 1,
    };
  }, [surrogate, x, y, dims, shown, scheme]);

  const gap = surrogate ? surrogateGap(surrogate, shown) : null;
  const what = definition(objectiveSpecs[shown]);
  const over = dims === 1 ? x : `${x} and ${y}`;
  const title =
    dims === 1
      ? `${shown}: the surrogate's mean over ${x}, with a ± ${BAND_STD} std band`
      : kind === "mean"
        ? `${shown}: the surrogate's mean over ${over}`
        : `${shown}: the surrogate's uncertainty (standard deviation) over ${over}`;

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
        {dims === 2 && (
          <SegmentedControl
            size="xs"
            value={kind}
            onChange={(v) => setKind(v === "std" ? "std" : "mean")}
            data={[
              { value: "mean", label: "Mean" },
              { value: "std", label: "Uncertainty" },
            ]}
            aria-label="Show the surrogate's mean or its uncertainty"
            data-testid="surrogate-kind"
          />
        )}
        <Text size="sm" ml="auto" data-testid="adaptive-progress">
          {surrogate ? adaptiveProgressText(surrogate.progress) : "…"}
        </Text>
      </Group>
      <div>
        <Text size="sm" fw={600} data-testid="surrogate-title">
          {surrogate ? title : "…"}
        </Text>
        {surrogate && (
          <Text size="xs" c="dimmed" data-testid="surrogate-caption">
            {what ? `${shown} is the ${what}` : shown} · {goalText(surrogate.progress, shown)}
          </Text>
        )}
      </div>
      <div data-testid="surrogate-view" data-dimensions={dims}>
        <Plot
          data={gap ? [] : data}
          layout={layout}
          height={340}
          aria-label={`surrogate of ${shown} over ${over}`}
          data-testid="surrogate-map"
          emptyMessage={gap ?? "Loading the surrogate…"}
        />
      </div>
      <Text size="xs" c="dimmed" data-testid="surrogate-note">
        {surrogate && !gap
          ? `${formatInt(surrogate.observed?.[shown] ?? 0)} completed runs feed the map; ${
              dims === 1 ? "points are their values" : "circles are runs"
            }, ringed the latest batch. ${fixedText(surrogate)}`
          : ""}
      </Text>
    </Stack>
  );
}
