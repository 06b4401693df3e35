import { fireEvent, screen, within } from "@testing-library/react";
import { useState } from "react";
import { describe, expect, it } from "vitest";
import type { Upload } from "@/lib/types";
import { renderWithApp } from "@/test/render";
import { formFromUpload, type WizardForm } from "../lib/form";
import { offeredSeries } from "../lib/series";
import { CaseInspectionPanel } from "./case-inspection";
import { ObjectivesEditor } from "./objectives-editor";

// an upload of pitzDaily with an areaAverage of p on the inlet, as the API returns it
const upload = {
  id: "0b7c2f0e-1111-4222-8333-944445555666",
  filename: "pitzDaily.tar.gz",
  size_bytes: 1000,
  unpacked_bytes: 5000,
  files_count: 14,
  placeholders: { "0/U": ["Uin"] },
  has_mesh: false,
  has_block_mesh_dict: true,
  created_at: "2026-11-24T00:00:00Z",
  inspection: {
    solver: "simpleFoam",
    series: ["inletP.areaAverage(p)", "residual.Ux", "residual.p"],
    open_prefixes: [],
    residuals: ["residual.Ux", "residual.p"],
    function_objects: [
      {
        name: "inletP",
        type: "surfaceFieldValue",
        series: ["inletP.areaAverage(p)"],
        open_prefix: null,
        note: "",
      },
      {
        name: "probes1",
        type: "probes",
        series: [],
        open_prefix: null,
        note: "writes files without .dat",
      },
    ],
    placeholders: { "0/U": [{ name: "Uin", type: "number", line: 26 }] },
    mesh_steps: ["blockMesh"],
    has_mesh: false,
    errors: [],
    notes: [],
  },
} as unknown as Upload;

const seriesInput = () =>
  screen.getAllByLabelText("p_in series").find((e) => e.tagName === "INPUT") as HTMLInputElement;

function Editor() {
  const [form, setForm] = useState<WizardForm>(() => ({
    ...formFromUpload(upload),
    objectives: [
      { key: "a", name: "p_in", kind: "series", series: "", reduce: "last", n: "20", expr: "" },
    ],
  }));
  return (
    <ObjectivesEditor
      form={form}
      update={(patch) => setForm((f) => ({ ...f, ...patch }))}
      errors={{}}
      offered={offeredSeries(form, null)}
    />
  );
}

describe("the wizard on an uploaded case", () => {
  it("preselects the solver its controlDict names", () => {
    expect(formFromUpload(upload).solver).toBe("simpleFoam");
  });

  it("offers exactly the series the case's inspection found, not a fixed list", () => {
    renderWithApp(<Editor />);
    const input = seriesInput();
    fireEvent.focus(input);
    fireEvent.click(input);
    const options = screen.getAllByRole("option").map((o) => o.textContent);
    expect(options).toEqual(["inletP.areaAverage(p)", "residual.Ux", "residual.p"]);
    expect(options).not.toContain("forceCoeffs.Cl");
  });

  it("names the close match when a typed series is not one the case writes", () => {
    renderWithApp(<Editor />);
    fireEvent.change(seriesInput(), {
      target: { value: "inletP.areaAverage(P)" },
    });
    expect(
      screen.getByText(
        "the case writes no series named inletP.areaAverage(P); did you mean inletP.areaAverage(p)?",
      ),
    ).toBeTruthy();
  });

  it("shows the placeholders with their types and why a function object sends nothing", () => {
    renderWithApp(<CaseInspectionPanel inspection={upload.inspection!} />);
    const table = screen.getByRole("table", { name: "Placeholders" });
    const row = within(table).getByText("Uin").closest("tr")!;
    expect(within(row).getByText("number")).toBeTruthy();
    expect(within(row).getByText("0/U:26")).toBeTruthy();
    expect(screen.getByTestId("inspected-solver").textContent).toBe("simpleFoam");
    expect(screen.getByText(/writes files without \.dat/)).toBeTruthy();
  });
});
