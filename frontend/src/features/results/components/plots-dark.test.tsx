import { MantineProvider } from "@mantine/core";
import { render, waitFor } from "@testing-library/react";
import Plotly from "plotly.js-dist-min";
import { beforeEach, describe, expect, it, vi } from "vitest";
import type { Run } from "@/lib/types";
import { CpPlot } from "./cp-plot";
import { ObjectivePolar } from "./objective-polar";

type AxisLayout = { gridcolor?: string };
type DrawnLayout = {
  xaxis?: AxisLayout;
  yaxis?: AxisLayout;
  template?: { layout: { xaxis: AxisLayout; yaxis: AxisLayout } };
};

/** The grid colour each axis is drawn with: the plot's own, else its theme template's. */
function gridColours(): string[] {
  const calls = vi.mocked(Plotly.react).mock.calls;
  const layout = calls[calls.length - 1]![2] as DrawnLayout;
  return (["xaxis", "yaxis"] as const).map(
    (axis) => layout[axis]?.gridcolor ?? layout.template!.layout[axis].gridcolor!,
  );
}

function renderIn(scheme: "dark" | "light", ui: React.ReactElement) {
  return render(<MantineProvider forceColorScheme={scheme}>{ui}</MantineProvider>);
}

const cp = {
  patches: ["walls"],
  reference: { text: "Cp", magUInf: 26, rhoInf: null, pRef: 0, lRef: 1, chord: 1 },
  x_over_c: [0, 0.5, 1],
  cp: [1, -0.5, 0.2],
  side: ["lower" as const, "upper" as const, "lower" as const],
  patch: ["walls", "walls", "walls"],
};

const run = (i: number, cl: number, cd: number) =>
  ({
    id: `r${i}`,
    index: i,
    parameters: { aoa: i },
    objectives: { Cl: cl, Cd: cd },
  }) as unknown as Run;

describe("Result plots follow the colour scheme", () => {
  beforeEach(() => vi.mocked(Plotly.react).mockClear());

  it.each([
    ["dark", "#3a3a3a"],
    ["light", "#e9ecef"],
  ] as const)("the Cp plot's grid lines in the %s theme", async (scheme, colour) => {
    renderIn(scheme, <CpPlot cp={cp} />);
    await waitFor(() => expect(Plotly.react).toHaveBeenCalled());
    expect(gridColours()).toEqual([colour, colour]);
  });

  it.each([
    ["dark", "#3a3a3a"],
    ["light", "#e9ecef"],
  ] as const)("the polar's grid lines in the %s theme", async (scheme, colour) => {
    renderIn(
      scheme,
      <ObjectivePolar
        runs={[run(0, 0.1, 0.01), run(4, 0.5, 0.02)]}
        objectives={["Cl", "Cd"]}
        parameters={["aoa"]}
      />,
    );
    await waitFor(() => expect(Plotly.react).toHaveBeenCalled());
    expect(gridColours()).toEqual([colour, colour]);
  });
});
