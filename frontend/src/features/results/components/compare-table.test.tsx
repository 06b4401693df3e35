import { screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Run } from "@/lib/types";
import { renderWithApp } from "@/test/render";
import { CompareTable } from "./compare-table";

const run = (id: string, index: number, aoa: number, Cl: number | null) =>
  ({
    id,
    index,
    state: "completed",
    parameters: { aoa, speed: 26 },
    objectives: { Cl, Cd: 0.02 },
  }) as unknown as Run;

describe("CompareTable", () => {
  it("puts the runs' parameters and objectives side by side and marks what differs", () => {
    renderWithApp(<CompareTable runs={[run("a", 1, 0, 0.11), run("b", 2, 8, null)]} />);
    const table = screen.getByTestId("compare-table");
    const rows = [...table.querySelectorAll("tbody tr")].map((tr) => [
      tr.querySelector("th")!.textContent,
      [...tr.querySelectorAll("td")].map((td) => td.textContent),
      tr.hasAttribute("data-differs"),
    ]);
    expect(rows).toEqual([
      ["state", ["completed", "completed"], false],
      ["aoa", ["0", "8"], true],
      ["speed", ["26", "26"], false],
      ["Cl", ["0.11", "—"], true],
      ["Cd", ["0.02", "0.02"], false],
    ]);
    expect(screen.getByRole("link", { name: "Run 2" })).toHaveAttribute("href", "/runs/b");
  });

  it("names runs of different studies by study and index (indexes repeat across studies)", () => {
    const of = (r: Run, study: string, study_name: string) => ({ ...r, study, study_name }) as Run;
    renderWithApp(
      <CompareTable
        runs={[
          of(run("a", 3, 0, 0.1), "s1", "NACA polar"),
          of(run("b", 0, 4, 0.5), "s2", "Re sweep"),
        ]}
      />,
    );
    expect(screen.getByRole("link", { name: "NACA polar · run 3" })).toHaveAttribute(
      "href",
      "/runs/a",
    );
    expect(screen.getByRole("link", { name: "Re sweep · run 0" })).toBeInTheDocument();
  });
});
