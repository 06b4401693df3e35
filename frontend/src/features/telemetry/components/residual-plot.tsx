import { Group, Text } from "@mantine/core";
import type { Data } from "plotly.js";
import { useMemo } from "react";
import { Plot } from "@/components/plot";
import { ErrorState } from "@/components/states";
import { decimate } from "@/lib/decimate";
import { fieldOf, isResidual } from "../lib/series";
import { useRunTelemetry } from "../hooks/use-run-telemetry";

const pickResiduals = (available: string[]) => available.filter(isResidual);
const MAX_POINTS = 1500;

/** Initial residual of every solved field, log scale, live while the run runs. */
export function ResidualPlot({
  runId,
  active,
  live,
}: {
  runId: string;
  /** poll for new points */
  active: boolean;
  /** say "live" (the solver runs now); defaults to active */
  live?: boolean;
}) {
  const telemetry = useRunTelemetry(runId, {
    pick: pickResiduals,
    pickKey: "residuals",
    active,
    maxPoints: MAX_POINTS,
  });
  const series = telemetry.data?.series;
  const data = useMemo<Data[]>(
    () =>
      Object.entries(series ?? {})
        .filter(([name]) => isResidual(name))
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([name, s]) => {
          const d = decimate(s.x, s.y, MAX_POINTS);
          return {
            type: "scattergl",
            mode: "lines",
            name: fieldOf(name),
            x: d.x,
            y: d.y,
            line: { width: 1.6 },
            hovertemplate: `${fieldOf(name)}: %{y:.3e}<extra>iteration %{x}</extra>`,
          } as Data;
        }),
    [series],
  );
  const last = useMemo(() => {
    const xs = Object.values(series ?? {}).map((s) => s.x[s.x.length - 1] ?? 0);
    return xs.length ? Math.max(...xs) : null;
  }, [series]);

  if (telemetry.isError && !telemetry.data)
    return (
      <ErrorState
        error={telemetry.error}
        title="Residuals unavailable"
        onRetry={() => telemetry.refetch()}
      />
    );
  return (
    <>
      <Group justify="space-between" mb={4}>
        <Text size="xs" c="dimmed">
          Initial residuals (log scale){last !== null ? ` · iteration ${last}` : ""}
        </Text>
        {(live ?? active) && (
          <Text size="xs" c="blue" fw={600}>
            ● live
          </Text>
        )}
      </Group>
      <Plot
        data={data}
        layout={RESIDUAL_LAYOUT}
        height={340}
        aria-label="Residuals"
        data-testid="residual-plot"
        emptyMessage={
          telemetry.isLoading
            ? undefined
            : active
              ? "Waiting for the solver's first iteration…"
              : "This run recorded no residuals."
        }
      />
    </>
  );
}

const RESIDUAL_LAYOUT = {
  xaxis: { title: { text: "iteration" }, zeroline: false },
  yaxis: {
    type: "log" as const,
    title: { text: "initial residual" },
    exponentformat: "e" as const,
  },
};
