import { Group, Text } from "@mantine/core";
import type { Data } from "plotly.js";
import { useMemo } from "react";
import { Plot } from "@/components/plot";
import { ErrorState } from "@/components/states";
import { fieldOf, isResidual } from "../lib/series";
import { lineTrace } from "../lib/traces";
import { useRunTelemetry } from "../hooks/use-run-telemetry";
import { LiveMark } from "./live-mark";

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
        .map(([name, s]) =>
          lineTrace(fieldOf(name), s, MAX_POINTS, {
            hovertemplate: `${fieldOf(name)}: %{y:.3e}<extra>iteration / time %{x}</extra>`,
          }),
        ),
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
          Initial residuals (log scale){last !== null ? ` · iteration / time ${last}` : ""}
        </Text>
        {(live ?? active) && <LiveMark />}
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
  xaxis: { title: { text: "iteration / time" }, zeroline: false },
  yaxis: {
    type: "log" as const,
    title: { text: "initial residual" },
    exponentformat: "e" as const,
  },
};
