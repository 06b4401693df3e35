import type { Data } from "plotly.js";
import { useMemo } from "react";
import { Plot } from "@/components/plot";
import { decimate } from "@/lib/decimate";
import { isResource } from "../lib/series";
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
    if (cpu) {
      const d = decimate(cpu.x, cpu.y, 600);
      out.push({
        type: "scatter",
        mode: "lines",
        name: "CPU %",
        x: d.x,
        y: d.y,
        line: { width: 1.5 },
      } as Data);
    }
    if (mem) {
      const d = decimate(mem.x, mem.y, 600);
      out.push({
        type: "scatter",
        mode: "lines",
        name: "memory (MB)",
        x: d.x,
        y: d.y.map((b) => (b === null ? null : b / 1e6)),
        yaxis: "y2",
        line: { width: 1.5, dash: "dot" },
      } as Data);
    }
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
