import { Group, Select, Text } from "@mantine/core";
import type { Data } from "plotly.js";
import { useMemo, useState } from "react";
import { Plot } from "@/components/plot";
import { fieldOf, isResidual } from "../lib/series";
import { lineTrace } from "../lib/traces";
import { useRunsTelemetry } from "../hooks/use-run-telemetry";

const pickResiduals = (available: string[]) => available.filter(isResidual);

export interface OverlayRun {
  id: string;
  label: string;
  active: boolean;
}

/** One residual field of several runs on one log-scale plot (compare convergence). */
export function ResidualOverlay({ runs }: { runs: OverlayRun[] }) {
  const results = useRunsTelemetry(runs, {
    pick: pickResiduals,
    pickKey: "residuals",
    maxPoints: 600,
  });
  const fields = useMemo(() => {
    const set = new Set<string>();
    for (const r of results)
      for (const n of r.data?.available ?? []) if (isResidual(n)) set.add(fieldOf(n));
    return [...set].sort();
  }, [results]);
  const [field, setField] = useState<string | null>(null);
  const current =
    field && fields.includes(field) ? field : ((fields.includes("p") ? "p" : fields[0]) ?? null);

  const data = useMemo<Data[]>(
    () =>
      runs.flatMap((run, i) => {
        const s = current ? results[i]?.data?.series[`residual.${current}`] : undefined;
        if (!s) return [];
        return [lineTrace(run.label, s, 600)];
      }),
    [runs, results, current],
  );

  return (
    <>
      <Group justify="space-between" mb={4}>
        <Text size="xs" c="dimmed">
          {runs.length === 0
            ? "Tick runs in the table to compare their residuals."
            : current
              ? `Residual of ${current} for ${runs.length} selected run${runs.length === 1 ? "" : "s"}`
              : `${runs.length} selected run${runs.length === 1 ? "" : "s"}`}
        </Text>
        <Select
          size="xs"
          data={fields}
          value={current}
          onChange={setField}
          placeholder="field"
          aria-label="Residual field"
          w={120}
          disabled={!fields.length}
          allowDeselect={false}
        />
      </Group>
      <Plot
        data={data}
        layout={{
          xaxis: { title: { text: "iteration" }, zeroline: false },
          yaxis: {
            type: "log",
            title: { text: "initial residual" },
            exponentformat: "e",
          },
          showlegend: true,
        }}
        height={320}
        aria-label="Residuals of selected runs"
        data-testid="residual-overlay"
        emptyMessage={
          runs.length === 0
            ? "Select runs in the table (the checkbox column) to overlay their residuals."
            : results.some((r) => r.isPending)
              ? "Loading residuals…"
              : "The selected runs have no residuals yet."
        }
      />
    </>
  );
}
