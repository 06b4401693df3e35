import { screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { renderWithApp } from "@/test/render";
import { describeTraces } from "@/lib/plot-summary";
import { Plot } from "./plot";

describe("Plot's text alternative", () => {
  it("describes each series in words: points, x range and last value", () => {
    renderWithApp(
      <Plot
        aria-label="Residuals"
        data-testid="plot"
        data={[
          { type: "scatter", name: "p", x: [1, 2, 200], y: [1, 0.1, 0.0001234] },
          { type: "scatter", name: "Ux", x: [1, 2], y: [0.5, 0.25] },
        ]}
      />,
    );
    const plot = screen.getByRole("figure", { name: "Residuals" });
    expect(plot).toHaveAccessibleDescription(
      "p: 3 points, x from 1 to 200, last value 1.234e-4; Ux: 2 points, x from 1 to 2, last value 0.25.",
    );
  });

  it("counts a 3-D scatter's points", () => {
    expect(
      describeTraces([{ type: "scatter3d", name: "front", x: [1, 2], y: [3, 4], z: [5, 6] }]),
    ).toBe("front: 2 points, x from 1 to 2, last value 4.");
  });

  it("says why a plot is empty", () => {
    renderWithApp(
      <Plot aria-label="Forces" data={[]} emptyMessage="The run sent no forces yet." />,
    );
    expect(screen.getByRole("figure", { name: "Forces" })).toHaveAccessibleDescription(
      "The run sent no forces yet.",
    );
  });

  it("keeps a long list of series short", () => {
    const many = Array.from({ length: 15 }, (_, i) => ({ name: `s${i}`, x: [i], y: [i] }));
    expect(describeTraces(many)).toMatch(/and 3 more series\.$/);
  });
});
