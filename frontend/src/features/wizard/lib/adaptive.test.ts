import { describe, expect, it } from "vitest";
import type { CaseTemplate } from "@/lib/types";
import { adaptiveOutline, newConstraint, rowsForAdaptive, type AdaptiveSpec } from "./adaptive";
import { formFromSpec, formFromTemplate, type WizardForm } from "./form";
import { stepOfField, toSpec } from "./to-spec";

const cavity: CaseTemplate = {
  name: "cavity",
  title: "Cavity",
  description: "",
  solver: "icoFoam",
  solvers: ["icoFoam"],
  resources: { processes: 1, memory_gb: 1 },
  parameters: {
    lid_velocity: { type: "float", unit: "m/s", default: 1, min: 0.001, max: 100 },
    cells: { type: "int", default: 20, min: 5, max: 200 },
    scheme: { type: "str", default: "Gauss linear", choices: ["Gauss linear", "Gauss upwind"] },
  },
  derived: {},
  objectives: {
    u_min: { series: "returnFlow.min(Ux)", reduce: "last" },
    mean_speed: { series: "meanSpeed.volAverage(mag(U))", reduce: "last" },
  },
  demo: { parameters: { cells: { values: [10, 20, 40, 80] } }, combine: "grid" },
  placeholders: {},
  inspection: null,
};

/** The cavity form with adaptive sampling picked, as the parameter editor leaves it. */
function adaptive(patch: (f: WizardForm) => void = () => {}): WizardForm {
  const base = formFromTemplate(cavity, { name: "adaptive cavity" });
  const f: WizardForm = {
    ...base,
    combine: "adaptive",
    parameters: rowsForAdaptive(base.parameters),
  };
  patch(f);
  return f;
}
const row = (f: WizardForm, name: string) => f.parameters.find((r) => r.name === name)!;

describe("adaptive sampling in the wizard", () => {
  it("turns a list into bounds spanning it, whole numbers for a whole-number parameter", () => {
    const f = adaptive();
    expect(row(f, "cells")).toMatchObject({ mode: "sampled", min: "10", max: "80", integer: true });
    expect(row(f, "lid_velocity").mode).toBe("fixed"); // a single value stays one
  });

  it("makes the spec's adaptive block, the seed and no samples", () => {
    const { spec, errors } = toSpec(
      adaptive((f) => {
        f.adaptive = { ...f.adaptive, budget: "12", batch: "2", tolerance: "0.05" };
        f.seed = "7";
      }),
    );
    expect(errors).toEqual({});
    expect(spec).toMatchObject({
      combine: "adaptive",
      seed: 7,
      parameters: { cells: { min: 10, max: 80, integer: true } },
      adaptive: { goal: "map", budget: 12, batch: 2, tolerance: 0.05 },
    });
    expect(spec).not.toHaveProperty("samples");
    // map with no objective chosen learns all of the study's: the key is left out
    expect(spec.adaptive).not.toHaveProperty("objectives");
    expect(spec.adaptive).not.toHaveProperty("direction");
  });

  it("optimises one objective in the chosen direction", () => {
    const { spec, errors } = toSpec(
      adaptive((f) => {
        f.adaptive = {
          ...f.adaptive,
          goal: "optimise",
          objectives: ["u_min"],
          direction: "min",
          initial: "5",
          budget: "9",
        };
      }),
    );
    expect(errors).toEqual({});
    expect(spec.adaptive).toEqual({
      goal: "optimise",
      objectives: ["u_min"],
      direction: "min",
      initial: 5,
      budget: 9,
      batch: 4,
    });
  });

  it("sizes batches to what can run at once when the batch size is auto", () => {
    const { spec, errors } = toSpec(
      adaptive((f) => (f.adaptive = { ...f.adaptive, batch: " Auto " })),
    );
    expect(errors).toEqual({});
    expect(spec.adaptive?.batch).toBe("auto");
  });

  it.each([
    [{ budget: "" }, "adaptive.budget", "whole number from 1 to 100000"],
    [{ budget: "2.5" }, "adaptive.budget", "whole number"],
    [{ budget: "1" }, "adaptive.budget", "no room for a surrogate"],
    [{ budget: "4", initial: "6" }, "adaptive.budget", "below the initial design (6 runs)"],
    [{ batch: "0" }, "adaptive.batch", "from 1 to 1000, or auto"],
    [{ batch: "many" }, "adaptive.batch", "or auto"],
    [{ initial: "1" }, "adaptive.initial", "from 2 to 10000"],
    [{ tolerance: "-1" }, "adaptive.tolerance", "above 0"],
    [
      { goal: "optimise" as const, objectives: [] },
      "adaptive.objectives",
      "pick the one objective to maximise",
    ],
    [{ objectives: ["Cl"] }, "adaptive.objectives", "no objective Cl; it has u_min, mean_speed"],
  ])("names what is wrong with %o on its field", (change, field, needle) => {
    const { errors } = toSpec(adaptive((f) => (f.adaptive = { ...f.adaptive, ...change })));
    expect(errors[field]).toContain(needle);
    expect(stepOfField(field)).toBe(1); // shown on the parameters step
  });

  it.each([
    [{ objectives: ["u_min"] }, "a Pareto front trades off 2 or 3 objectives: you picked 1"],
    [{ objectives: [] }, "a Pareto front trades off 2 or 3 objectives: pick them"],
    [{ objectives: ["u_min", "u_min"] }, "pick each objective once"],
  ])("asks a Pareto front for two or three distinct objectives: %o", (change, needle) => {
    const { errors } = toSpec(
      adaptive((f) => (f.adaptive = { ...f.adaptive, goal: "pareto", ...change })),
    );
    expect(errors["adaptive.objectives"]).toBe(needle);
  });

  it.each([
    [{ objective: "Cl", min: "0.5" }, "adaptive.constraints.Cl", "no objective Cl; it has u_min"],
    [{ objective: "u_min" }, "adaptive.constraints.u_min", "give u_min a min, a max or both"],
    [
      { objective: "u_min", min: "low" },
      "adaptive.constraints.u_min",
      "min of u_min must be a number",
    ],
    [
      { objective: "u_min", min: "2", max: "1" },
      "adaptive.constraints.u_min",
      "min of u_min (2) is above its max (1)",
    ],
  ])("names what is wrong with the constraint %o on its objective", (change, field, needle) => {
    const { errors } = toSpec(
      adaptive((f) => {
        f.adaptive = {
          ...f.adaptive,
          goal: "optimise",
          objectives: ["mean_speed"],
          constraints: [{ ...newConstraint(), ...change }],
        };
      }),
    );
    expect(errors[field]).toContain(needle);
    expect(stepOfField(field)).toBe(1);
  });

  it("asks which objective an unnamed constraint is for, and to give each objective one row", () => {
    const blank = newConstraint();
    const { errors } = toSpec(
      adaptive((f) => {
        f.adaptive = {
          ...f.adaptive,
          goal: "optimise",
          objectives: ["mean_speed"],
          constraints: [
            blank,
            { ...newConstraint("u_min"), min: "0" },
            { ...newConstraint("u_min"), max: "1" },
          ],
        };
      }),
    );
    expect(errors[`adaptive.constraints.${blank.key}`]).toBe(
      "pick the objective this range is for, or remove the row",
    );
    expect(errors["adaptive.constraints.u_min"]).toBe(
      "u_min is constrained twice: give its min and max on one row",
    );
  });

  it("leaves constraints and the direction out of a map, which aims at nothing", () => {
    const { spec, errors } = toSpec(
      adaptive((f) => {
        f.adaptive = {
          ...f.adaptive,
          directions: { u_min: "min" },
          constraints: [{ ...newConstraint("u_min"), min: "0" }],
        };
      }),
    );
    expect(errors).toEqual({});
    expect(spec.adaptive).not.toHaveProperty("direction");
    expect(spec.adaptive).not.toHaveProperty("constraints");
  });

  it("gives a Pareto front each objective's direction once one has its own", () => {
    const { spec, errors } = toSpec(
      adaptive((f) => {
        f.adaptive = {
          ...f.adaptive,
          goal: "pareto",
          objectives: ["u_min", "mean_speed"],
          directions: { u_min: "min", Cl: "max" }, // Cl is no longer chosen
        };
      }),
    );
    expect(errors).toEqual({});
    expect(spec.adaptive?.direction).toEqual({ u_min: "min", mean_speed: "max" });
  });

  it.each<[string, AdaptiveSpec]>([
    [
      "a Pareto front with a direction per objective and constraints",
      {
        goal: "pareto",
        objectives: ["u_min", "mean_speed"],
        direction: { u_min: "min", mean_speed: "max" },
        constraints: { mean_speed: { min: 0.5 }, u_min: { min: -1, max: 0 } },
        budget: 30,
        batch: 3,
        tolerance: 0.01,
      },
    ],
    [
      "a Pareto front with one direction for both",
      {
        goal: "pareto",
        objectives: ["u_min", "mean_speed"],
        direction: "min",
        budget: 20,
        batch: 4,
      },
    ],
    [
      "a constrained optimisation",
      {
        goal: "optimise",
        objectives: ["mean_speed"],
        direction: "max",
        constraints: { u_min: { max: 0.02 } },
        initial: 6,
        budget: 12,
        batch: 2,
      },
    ],
  ])("opens %s and saves it unchanged", (_, saved) => {
    const { spec } = toSpec(adaptive());
    const stored = { ...spec, adaptive: saved };
    const again = formFromSpec(stored, cavity);
    const out = toSpec(again);
    expect(out.errors).toEqual({});
    expect(out.spec).toEqual(stored);
  });

  it("refuses lists, equal bounds, text bounds and a space with nothing to sample", () => {
    const listed = toSpec(
      adaptive((f) => Object.assign(row(f, "lid_velocity"), { mode: "values", values: "1, 2" })),
    );
    expect(listed.errors["parameters.lid_velocity"]).toContain("bounds or one value");
    const flat = toSpec(adaptive((f) => Object.assign(row(f, "cells"), { min: "20", max: "20" })));
    expect(flat.errors["parameters.cells"]).toContain("bounds with a range");
    const text = toSpec(
      adaptive((f) => Object.assign(row(f, "scheme"), { mode: "sampled", min: "1", max: "2" })),
    );
    expect(text.errors["parameters.scheme"]).toContain("text parameter");
    const none = toSpec(
      adaptive((f) => Object.assign(row(f, "cells"), { mode: "fixed", value: "20" })),
    );
    expect(none.errors.parameters).toContain("at least one parameter with bounds");
  });

  it("needs the study to have objectives", () => {
    const { errors } = toSpec(adaptive((f) => (f.objectives = [])));
    expect(errors["adaptive.objectives"]).toContain("add one in the Objectives step");
  });

  it("reads a saved adaptive spec back into the same fields", () => {
    const { spec } = toSpec(
      adaptive((f) => {
        f.adaptive = { ...f.adaptive, goal: "optimise", objectives: ["mean_speed"], budget: "8" };
      }),
    );
    const again = formFromSpec(spec, cavity);
    expect(again.combine).toBe("adaptive");
    expect(again.adaptive).toMatchObject({
      goal: "optimise",
      objectives: ["mean_speed"],
      direction: "max",
      budget: "8",
      batch: "4",
      initial: "",
    });
    expect(toSpec(again).spec).toEqual(spec);
  });

  it("outlines the batches after the first runs for the preview", () => {
    const outline = {
      goal: "map" as const,
      objectives: ["u_min", "mean_speed"],
      direction: null,
      directions: {},
      constraints: [],
      initial: 4,
      batch: 2,
      batch_auto: false,
      budget: 10,
      max_batches: 4 as number | null,
      tolerance: null,
    };
    expect(adaptiveOutline(outline)).toBe(
      "Then batches of 2 up to 10 runs in all (≤ 4 batches), mapping u_min, mean_speed.",
    );
    // batch auto: sized when each is made, to what can run at once (the preview says now)
    expect(adaptiveOutline({ ...outline, batch: 6, batch_auto: true, max_batches: null })).toBe(
      "Then batches as large as can run at once (6 now) up to 10 runs in all, mapping u_min, mean_speed.",
    );
    expect(
      adaptiveOutline({
        ...outline,
        goal: "optimise",
        objectives: ["u_min"],
        direction: "min",
        budget: 4,
        tolerance: 0.1,
      }),
    ).toBe(
      "The budget (4 runs) is spent by the initial design, minimising u_min, or until the score falls below 0.1.",
    );
    expect(adaptiveOutline({ ...outline, goal: "pareto", objectives: ["LD", "Cd"] })).toBe(
      "Then batches of 2 up to 10 runs in all (≤ 4 batches), finding the trade-offs between LD and Cd.",
    );
    expect(
      adaptiveOutline({
        ...outline,
        goal: "pareto",
        objectives: ["LD", "Cd"],
        constraints: [
          { objective: "Cl", min: 0.5, max: null },
          { objective: "Cm", min: -0.1, max: 0.1 },
          { objective: "Cd", min: null, max: 0.02 },
        ],
        tolerance: 0.01,
      }),
    ).toBe(
      "Then batches of 2 up to 10 runs in all (≤ 4 batches), finding the trade-offs between LD and Cd, keeping Cl ≥ 0.5, Cm between -0.1 and 0.1 and Cd ≤ 0.02, or until the score falls below 0.01.",
    );
  });
});
