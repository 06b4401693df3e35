import type { Data } from "plotly.js";
import { useMemo } from "react";
import { Plot } from "@/components/plot";
import { isResource } from "../lib/series";
import { lineTrace } from "../lib/traces";
import { useRunTelemetry } from "../hooks/use-run-telemetry";

const pickResources = (available: string[]) => available.filter(isResource);

/** CPU (% of one core, summed over the process tree) and resident memory over time. */
export function ResourcePlot({ runId, active }: { runId: string; active: boolean }) {
  const telemetry = useRunTelemetry(runId, {
    pick: pickResources,
    pickKey: "resources",
    active,
    maxPoints: 600,
  });
  const series = telemetry.data?.series;
  const data = useMemo<Data[]>(() => {
    const out: Data[] = [];
    const cpu = series?.["cpu.percent"];
    const mem = series?.["memory.rss"];
    if (cpu) out.push(lineTrace("CPU %", cpu, 600, { type: "scatter" }));
    if (mem)
      out.push(
        lineTrace(
          "memory (MB)",
          { x: mem.x, y: mem.y.map((b) => (b === null ? null : b / 1e6)) },
          600,
          {
            type: "scatter",
            yaxis: "y2",
            line: { width: 1.6, dash: "dot" },
          },
        ),
      );
    return out;
  }, [series]);
  return (
    <Plot
      data={data}
      layout={{
        xaxis: { title: { text: "seconds since start" }, zeroline: false },
        yaxis: { title: { text: "CPU %" }, rangemode: "tozero" },
        yaxis2: {
          title: { text: "MB" },
          overlaying: "y",
          side: "right",
          rangemode: "tozero",
          showgrid: false,
        },
        margin: { l: 56, r: 56, t: 30, b: 44 },
      }}
      height={220}
      aria-label="CPU and memory use"
      data-testid="resource-plot"
      emptyMessage={telemetry.isLoading ? undefined : "No resource samples recorded."}
    />
  );
}
