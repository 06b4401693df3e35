import { Stack, Text } from "@mantine/core";
import { useMemo } from "react";
import { Plot } from "@/components/plot";
import type { SurfaceCp } from "../api/results";
import { cpTraces } from "../lib/field-traces";

/** The surface pressure coefficient along the force patches, with the reference it used. */
export function CpPlot({ cp, height = 300 }: { cp: SurfaceCp; height?: number }) {
  const data = useMemo(() => cpTraces(cp), [cp]);
  const layout = useMemo(
    () => ({
      xaxis: { title: { text: "x/c" }, zeroline: false },
      // aerodynamicists' convention: suction (negative Cp) up
      yaxis: { title: { text: "Cp" }, autorange: "reversed" as const },
    }),
    [],
  );
  return (
    <Stack gap={4}>
      <Plot
        data={data}
        layout={layout}
        height={height}
        aria-label={`Pressure coefficient along ${cp.patches.join(", ")}`}
        data-testid="cp-plot"
      />
      <Text size="xs" c="dimmed" data-testid="cp-reference">
        {cp.reference.text}
      </Text>
    </Stack>
  );
}
