import { Group, MultiSelect } from "@mantine/core";
import type { Data } from "plotly.js";
import { useMemo, useState } from "react";
import { Plot } from "@/components/plot";
import { ErrorState } from "@/components/states";
import { isPrimaryFunctionObject } from "../lib/series";
import { lineTrace } from "../lib/traces";
import { useRunTelemetry } from "../hooks/use-run-telemetry";
import { LiveMark } from "./live-mark";

const pickFunctionObjects = (available: string[]) => available.filter(isPrimaryFunctionObject);
const MAX_POINTS = 1500;

/** Forces and other function-object columns (forceCoeffs.Cl, …), pick which to show. */
export function ForcesPlot({
  runId,
  active,
  preferred = [],
  live,
}: {
  runId: string;
  active: boolean;
  live?: boolean;
  preferred?: string[];
}) {
  const telemetry = useRunTelemetry(runId, {
    pick: pickFunctionObjects,
    pickKey: "function-objects",
    active,
    maxPoints: MAX_POINTS,
  });
  const available = useMemo(
    () => (telemetry.data?.available ?? []).filter(isPrimaryFunctionObject),
    [telemetry.data?.available],
  );
  const [chosen, setChosen] = useState<string[] | null>(null);
  const defaults = useMemo(() => {
    const pref = preferred.filter((p) => available.includes(p));
    return pref.length ? pref : available.slice(0, 3);
  }, [preferred, available]);
  const shown = chosen ?? defaults;
  const series = telemetry.data?.series;

  const data = useMemo<Data[]>(
    () =>
      shown
        .filter((name) => series?.[name])
        .map((name) => lineTrace(name, series![name]!, MAX_POINTS)),
    [shown, series],
  );

  if (telemetry.isError && !telemetry.data)
    return (
      <ErrorState
        error={telemetry.error}
        title="Forces unavailable"
        onRetry={() => telemetry.refetch()}
      />
    );
  return (
    <>
      <Group justify="space-between" mb={4} wrap="nowrap">
        <MultiSelect
          size="xs"
          data={available}
          value={shown}
          onChange={setChosen}
          placeholder={available.length ? "Pick series" : "No function-object series yet"}
          aria-label="Series to plot"
          maxValues={6}
          searchable
          style={{ flex: 1, maxWidth: 520 }}
        />
        {(live ?? active) && <LiveMark />}
      </Group>
      <Plot
        data={data}
        layout={FORCES_LAYOUT}
        height={300}
        aria-label="Forces and function-object series"
        data-testid="forces-plot"
        emptyMessage={
          telemetry.isLoading
            ? undefined
            : active
              ? "Waiting for the first function-object output…"
              : "This run recorded no function-object series (forces, probes)."
        }
      />
    </>
  );
}

const FORCES_LAYOUT = {
  xaxis: { title: { text: "iteration / time" }, zeroline: false },
  yaxis: { zeroline: false },
};
