import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Study } from "@/lib/types";
import { mockApi, renderWithApp } from "@/test/render";
import { ObjectivesDialog } from "./objectives-dialog";

const study = {
  id: "s1",
  name: "inlet sweep",
  state: "completed",
  case: "u1",
  template: null,
  objectives: { p_in: { series: "inletP.areaAverage(p)", reduce: "last" } },
  spec: { name: "inlet sweep", case: "u1" },
} as unknown as Study;

const inspection = {
  solver: "simpleFoam",
  series: ["inletP.areaAverage(p)", "residual.p"],
  open_prefixes: [],
  residuals: ["residual.p"],
  function_objects: [],
  placeholders: {},
  mesh_steps: [],
  has_mesh: false,
  errors: [],
  notes: [],
};

describe("Edit objectives", () => {
  it("offers the case's series and sends the new objectives to be recomputed", async () => {
    const api = mockApi({
      "GET /api/v1/uploads/u1/": { status: 200, body: { id: "u1", inspection } },
      "PUT /api/v1/studies/s1/objectives/": () => ({ ...study }),
    });
    const { client } = renderWithApp(<ObjectivesDialog study={study} opened onClose={() => {}} />);
    fireEvent.click(screen.getByRole("button", { name: "Add objective" }));
    const names = screen.getAllByLabelText("Objective name");
    fireEvent.change(names[names.length - 1]!, { target: { value: "p_peak" } });
    const input = screen
      .getAllByLabelText("p_peak series")
      .find((e) => e.tagName === "INPUT") as HTMLInputElement;
    await waitFor(() => expect(client.getQueryData(["studies", "inspection", "s1"])).toBeTruthy());
    fireEvent.focus(input);
    fireEvent.change(input, { target: { value: "p" } });
    // the dropdown is portalled beside the modal, which hides its siblings from roles
    const listbox = await waitFor(() => {
      const found = document.getElementById(input.getAttribute("aria-controls") ?? "");
      expect(found).not.toBeNull();
      return found!;
    });
    const options = within(listbox).getAllByRole("option", { hidden: true });
    expect(options.map((o) => o.textContent)).toEqual(["inletP.areaAverage(p)", "residual.p"]);
    fireEvent.click(options[0]!);
    fireEvent.click(screen.getByTestId("save-objectives"));
    await waitFor(() => expect(api.calls.some((c) => c.method === "PUT")).toBe(true));
    const put = api.calls.find((c) => c.method === "PUT")!;
    expect(put.body).toEqual({
      objectives: {
        p_in: { series: "inletP.areaAverage(p)", reduce: "last" },
        p_peak: { series: "inletP.areaAverage(p)", reduce: "mean_last", n: 20 },
      },
    });
  });

  it("shows the one objective added as the whole change and saves no trust rule", async () => {
    const api = mockApi({
      "GET /api/v1/uploads/u1/": { status: 200, body: { id: "u1", inspection } },
      "PUT /api/v1/studies/s1/objectives/": () => ({ ...study }),
    });
    const withSpec = {
      ...study,
      objectives: {
        Cl: { series: "forceCoeffs.Cl", reduce: "mean_last", n: 20 },
        Cd: { series: "forceCoeffs.Cd", reduce: "mean_last", n: 20 },
      },
      spec: {
        ...study.spec,
        // as the user wrote them: defaults left out
        objectives: {
          Cl: { series: "forceCoeffs.Cl", reduce: "mean_last" },
          Cd: { series: "forceCoeffs.Cd", reduce: "mean_last" },
        },
      },
    } as unknown as Study;
    renderWithApp(<ObjectivesDialog study={withSpec} opened onClose={() => {}} />);
    expect(screen.getByTestId("objectives-diff")).toHaveTextContent("No change yet");
    expect(screen.getByTestId("save-objectives")).toBeDisabled();
    // the trust rules the spec does not set stay empty: their defaults are placeholders
    expect(screen.getByLabelText("residuals below")).toHaveValue("");
    fireEvent.click(screen.getByRole("button", { name: "Add objective" }));
    const names = screen.getAllByLabelText("Objective name");
    fireEvent.change(names[names.length - 1]!, { target: { value: "Cm" } });
    const input = screen
      .getAllByLabelText("Cm series")
      .find((e) => e.tagName === "INPUT") as HTMLInputElement;
    fireEvent.change(input, { target: { value: "forceCoeffs.Cm" } });
    const changes = screen.getAllByTestId("objectives-change");
    expect(changes.map((c) => c.textContent)).toEqual([
      "addedobjective Cm: mean_last of the last 20 of forceCoeffs.Cm",
    ]);
    fireEvent.click(screen.getByTestId("save-objectives"));
    await waitFor(() => expect(api.calls.some((c) => c.method === "PUT")).toBe(true));
    const put = api.calls.find((c) => c.method === "PUT")!;
    expect(put.body).toEqual({
      objectives: {
        Cl: { series: "forceCoeffs.Cl", reduce: "mean_last" },
        Cd: { series: "forceCoeffs.Cd", reduce: "mean_last" },
        Cm: { series: "forceCoeffs.Cm", reduce: "mean_last", n: 20 },
      },
    });
  });

  it("shows a trust rule's change before → after and sends the others as they were", async () => {
    const api = mockApi({
      "GET /api/v1/uploads/u1/": { status: 200, body: { id: "u1", inspection } },
      "PUT /api/v1/studies/s1/objectives/": () => ({ ...study }),
    });
    const ruled = {
      ...study,
      spec: { ...study.spec, trust: { residuals_below: 0.001, window: 50 } },
    } as unknown as Study;
    renderWithApp(<ObjectivesDialog study={ruled} opened onClose={() => {}} />);
    fireEvent.change(screen.getByLabelText("residuals below"), { target: { value: "0.01" } });
    fireEvent.change(screen.getByLabelText("oscillation below"), { target: { value: "0.1" } });
    expect(screen.getAllByTestId("objectives-change").map((c) => c.textContent)).toEqual([
      "changedtrust rule residuals_below: 0.001 → 0.01",
      "addedtrust rule oscillation_below: 0.1",
    ]);
    fireEvent.change(screen.getByLabelText("residuals below"), { target: { value: "x" } });
    expect(screen.getByText("a number above 0")).toBeInTheDocument();
    expect(screen.getByTestId("save-objectives")).toBeDisabled();
    fireEvent.change(screen.getByLabelText("residuals below"), { target: { value: "" } });
    fireEvent.click(screen.getByTestId("save-objectives"));
    await waitFor(() => expect(api.calls.some((c) => c.method === "PUT")).toBe(true));
    const put = api.calls.find((c) => c.method === "PUT")!;
    expect(put.body).toEqual({
      objectives: study.objectives,
      trust: { window: 50, oscillation_below: 0.1 },
    });
  });

  it("says what is wrong with a new objective instead of sending it", async () => {
    const api = mockApi({
      "GET /api/v1/uploads/u1/": { status: 200, body: { id: "u1", inspection } },
    });
    renderWithApp(<ObjectivesDialog study={study} opened onClose={() => {}} />);
    fireEvent.click(screen.getByRole("button", { name: "Add objective" }));
    const names = screen.getAllByLabelText("Objective name");
    fireEvent.change(names[names.length - 1]!, { target: { value: "p_peak" } });
    fireEvent.click(screen.getByTestId("save-objectives"));
    expect(await screen.findByText("give a series, e.g. forceCoeffs.Cl")).toBeInTheDocument();
    expect(api.calls.some((c) => c.method === "PUT")).toBe(false);
  });
});
