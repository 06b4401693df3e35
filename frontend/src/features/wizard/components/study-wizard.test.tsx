import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import type { CaseTemplate } from "@/lib/types";
import { emptyForm, formFromTemplate, type WizardForm } from "../lib/form";
import { StudyWizard } from "./study-wizard";

afterEach(() => vi.restoreAllMocks());

function wizard(
  initial: WizardForm,
  preview: Parameters<typeof mockApi>[0][string] = () => new Promise(() => {}),
  templates: CaseTemplate[] = [],
) {
  const api = mockApi({ "POST /api/v1/studies/preview/": preview });
  return {
    api,
    ...renderWithApp(
      <StudyWizard
        templates={templates}
        packages={[]}
        backends={[]}
        initial={initial}
        editId={null}
        renderTemplatePicker={() => <div>templates</div>}
        onSaved={() => {}}
      />,
    ),
  };
}

/** A steady (simpleFoam) template with a mesh refinement parameter. */
const pitzdaily = {
  name: "pitzdaily",
  title: "Backward-facing step",
  description: "",
  solver: "simpleFoam",
  solvers: ["simpleFoam"],
  resources: { processes: 1 },
  parameters: { mesh: { type: "float", default: 1, min: 0.25, max: 3 } },
  derived: {},
  objectives: { dp_static: { series: "pressureDrop.p" } },
  demo: { parameters: { mesh: { values: [0.3, 0.45, 0.675] } }, combine: "grid" },
  placeholders: {},
  inspection: null,
} as CaseTemplate;

describe("StudyWizard", () => {
  it("on an empty form says what the preview waits for, not 'fix 1 marked field'", () => {
    wizard(emptyForm());
    const panel = screen.getByTestId("preview-panel");
    expect(panel).not.toHaveTextContent(/marked field/);
    expect(screen.getByTestId("preview-waiting")).toHaveTextContent(
      "The preview appears once you pick a template, or upload a case.",
    );
  });

  it("shows a bad objective name under the name, not under its definition", async () => {
    wizard({
      ...emptyForm(),
      objectives: [
        {
          key: "k1",
          name: "L/D",
          kind: "expr",
          series: "",
          reduce: "last",
          n: "20",
          expr: "Cl / Cd",
        },
      ],
    });
    await userEvent.click(screen.getByTestId("step-3"));
    const name = screen.getByRole("textbox", { name: "Objective name" });
    expect(name).toHaveAccessibleDescription(/names are identifiers/);
    expect(screen.getByRole("textbox", { name: "L/D expression" })).not.toHaveAccessibleDescription(
      /names are identifiers/,
    );
  });

  it("offers adaptive sampling with its fields, each checked where it is typed", async () => {
    const cavity = {
      name: "cavity",
      title: "Cavity",
      description: "",
      solver: "icoFoam",
      solvers: ["icoFoam"],
      resources: { processes: 1 },
      parameters: { lid_velocity: { type: "float", default: 1, min: 0.001, max: 100 } },
      derived: {},
      objectives: { u_min: { series: "returnFlow.min(Ux)" } },
      demo: { parameters: { lid_velocity: { values: [0.5, 1, 2] } }, combine: "grid" },
      placeholders: {},
      inspection: null,
    } as CaseTemplate;
    wizard(formFromTemplate(cavity, { name: "adaptive" }));
    await userEvent.click(screen.getByTestId("step-1"));
    expect(screen.queryByTestId("adaptive-fields")).toBeNull();
    await userEvent.click(screen.getByText("Adaptive (Gaussian-process surrogate)"));
    expect(screen.getByTestId("adaptive-fields")).toBeVisible();
    // the list became bounds spanning it
    expect(screen.getByTestId("param-lid_velocity-min")).toHaveValue("0.5");
    expect(screen.getByTestId("param-lid_velocity-max")).toHaveValue("2");
    const budget = screen.getByTestId("adaptive-budget");
    await userEvent.clear(budget);
    await userEvent.type(budget, "1");
    expect(budget).toHaveAccessibleDescription(/no room for a surrogate: give at least 2 runs/);
    await userEvent.click(screen.getByTestId("step-4"));
    expect(screen.getByTestId("spec-yaml")).toHaveTextContent("combine: adaptive");
    expect(screen.getByTestId("spec-yaml")).toHaveTextContent("budget: 1");
  });

  it("lets the user trade off two objectives, each its own way, within a constraint", async () => {
    const cavity = {
      name: "cavity",
      title: "Cavity",
      description: "",
      solver: "icoFoam",
      solvers: ["icoFoam"],
      resources: { processes: 1 },
      parameters: { lid_velocity: { type: "float", default: 1, min: 0.001, max: 100 } },
      derived: {},
      objectives: {
        u_min: { series: "returnFlow.min(Ux)" },
        mean_speed: { series: "meanSpeed.volAverage(mag(U))" },
      },
      demo: { parameters: { lid_velocity: { values: [0.5, 1, 2] } }, combine: "grid" },
      placeholders: {},
      inspection: null,
    } as CaseTemplate;
    wizard(formFromTemplate(cavity, { name: "trade-off" }));
    await userEvent.click(screen.getByTestId("step-1"));
    await userEvent.click(screen.getByText("Adaptive (Gaussian-process surrogate)"));
    await userEvent.click(screen.getByText("Pareto front (trade-off)"));
    const picked = screen.getByRole("textbox", { name: "Objectives to trade off" });
    expect(picked).toHaveAccessibleDescription(/pick them/);
    // the dropdown is still in its opening transition in jsdom: hidden to the a11y tree
    await userEvent.click(picked);
    fireEvent.click(await screen.findByRole("option", { name: "u_min", hidden: true }));
    fireEvent.click(await screen.findByRole("option", { name: "mean_speed", hidden: true }));
    expect(picked).not.toHaveAccessibleDescription(/pick them/);
    await userEvent.click(
      within(screen.getByTestId("adaptive-direction-u_min")).getByText("Minimise"),
    );

    await userEvent.click(screen.getByRole("button", { name: "Add constraint" }));
    const min = screen.getByRole("textbox", { name: "Lowest row 1" });
    await userEvent.type(min, "0.5");
    expect(min).toHaveAttribute("aria-invalid", "true");
    expect(screen.getByRole("group", { name: "Constraint on row 1" })).toHaveAccessibleDescription(
      /pick the objective this range is for/,
    );
    const constrained = screen.getByRole("textbox", { name: "Objective of constraint 1" });
    await userEvent.click(constrained);
    const listbox = document.getElementById(constrained.getAttribute("aria-controls") ?? "")!;
    fireEvent.click(within(listbox).getByRole("option", { name: "mean_speed", hidden: true }));
    expect(screen.getByRole("textbox", { name: "Lowest mean_speed" })).toHaveAttribute(
      "aria-invalid",
      "false",
    );
    expect(
      screen.getByRole("group", { name: "Constraint on mean_speed" }),
    ).not.toHaveAccessibleDescription();

    await userEvent.click(screen.getByTestId("step-4"));
    const yaml = screen.getByTestId("spec-yaml").textContent ?? "";
    expect(yaml).toContain("goal: pareto");
    expect(yaml).toMatch(/objectives:\s*- u_min\s*- mean_speed/);
    expect(yaml).toMatch(/direction:\s*u_min: min\s*mean_speed: max/);
    expect(yaml).toMatch(/constraints:\s*mean_speed:\s*min: 0\.5/);
  });

  it("offers warm starts for a steady solver, off until switched on, and reviews them", async () => {
    wizard(formFromTemplate(pitzdaily, { name: "mesh levels" }), undefined, [pitzdaily]);
    await userEvent.click(screen.getByTestId("step-2"));
    const warm = screen.getByRole("switch", { name: "Warm start" });
    expect(warm).not.toBeChecked();
    expect(warm).toHaveAccessibleDescription(
      /nearest completed run's converged fields — fewer iterations, same converged answer; across meshes through mapFields/,
    );
    await userEvent.click(screen.getByTestId("step-4"));
    expect(screen.getByTestId("spec-yaml")).not.toHaveTextContent("warm_start");

    await userEvent.click(screen.getByTestId("step-2"));
    await userEvent.click(screen.getByRole("switch", { name: "Warm start" }));
    expect(screen.getByRole("switch", { name: "Warm start" })).toBeChecked();
    await userEvent.click(screen.getByTestId("step-4"));
    expect(screen.getByTestId("spec-yaml")).toHaveTextContent("warm_start: true");
  });

  it("offers no warm start for a transient solver", async () => {
    const cavity = { ...pitzdaily, name: "cavity", solver: "icoFoam", solvers: ["icoFoam"] };
    wizard(formFromTemplate(cavity, { name: "lid", warmStart: true }), undefined, [cavity]);
    await userEvent.click(screen.getByTestId("step-2"));
    expect(screen.getByTestId("solver-select")).toHaveValue("icoFoam");
    expect(screen.queryByRole("switch", { name: "Warm start" })).toBeNull();
    await userEvent.click(screen.getByTestId("step-4"));
    expect(screen.getByTestId("spec-yaml")).not.toHaveTextContent("warm_start");
  });

  it("shows the API's refusal of a warm start on the switch, and marks its step", async () => {
    const message =
      "warm_start needs a backend whose runs share a folder (local, Slurm): cloud is " +
      "openstack; choose another backend or leave warm_start out";
    const { api } = wizard(
      formFromTemplate(pitzdaily, { name: "mesh levels", warmStart: true }),
      { status: 400, body: { code: "invalid", message, field: "warm_start" } },
      [pitzdaily],
    );
    await waitFor(() => expect(screen.getByTestId("step-2")).toHaveTextContent("1 to fix"));
    expect(api.calls[0]?.body).toMatchObject({ template: "pitzdaily", warm_start: true });
    await userEvent.click(screen.getByTestId("step-2"));
    const warm = screen.getByRole("switch", { name: "Warm start" });
    expect(warm).toHaveAttribute("aria-invalid", "true");
    expect(warm).toHaveAccessibleDescription(/needs a backend whose runs share a folder/);
  });

  it("gives a step left behind a tick only when nothing on it is missing", async () => {
    wizard({ ...emptyForm(), template: "cavity" });
    await userEvent.click(screen.getByTestId("next-step"));
    const caseStep = screen.getByTestId("step-0");
    expect(caseStep).toHaveAttribute("data-done", "false");
    expect(caseStep).toHaveTextContent("not finished");
    await userEvent.click(screen.getByTestId("step-0"));
    await userEvent.type(screen.getByTestId("study-name"), "Lid speeds");
    await userEvent.click(screen.getByTestId("next-step"));
    expect(screen.getByTestId("step-0")).toHaveAttribute("data-done", "true");
    expect(screen.getByTestId("step-0")).not.toHaveTextContent("not finished");
  });

  it("before a case is uploaded (or after one was refused) asks for the case, marks nothing else", () => {
    wizard({ ...emptyForm(), source: "upload" });
    expect(screen.getByTestId("preview-panel")).not.toHaveTextContent(/marked field/);
    expect(screen.getByTestId("preview-waiting")).toHaveTextContent(
      "The preview appears once you upload a case archive (.tar.gz, .tgz or .zip).",
    );
    expect(screen.getByTestId("step-2")).not.toHaveTextContent("to fix");
  });

  it("names the step a marked field is on when it is not the one shown", () => {
    wizard({ ...emptyForm(), template: "cavity", memoryGb: 0 });
    expect(screen.getByTestId("preview-panel")).toHaveTextContent(
      "Fix 1 marked field on Run configuration to update the preview.",
    );
  });
});
