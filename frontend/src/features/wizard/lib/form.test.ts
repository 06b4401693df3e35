import { describe, expect, it } from "vitest";
import { errorAt } from "@/lib/spec";
import type { CaseTemplate } from "@/lib/types";
import { specToYaml } from "@/lib/spec-text";
import { impactSentence } from "./impact";
import { formFromSpec, formFromTemplate, type WizardForm } from "./form";
import { rowCount, stepOfField, toSpec } from "./to-spec";

const airfoil: CaseTemplate = {
  name: "airfoil2d",
  title: "Airfoil",
  description: "",
  solver: "simpleFoam",
  solvers: ["simpleFoam"],
  resources: { processes: 1, memory_gb: 1 },
  parameters: {
    aoa: { type: "float", unit: "deg", default: 4, min: -20, max: 20 },
    speed: { type: "float", unit: "m/s", default: 26, min: 1, max: 100 },
    iterations: { type: "int", default: 500, min: 10, max: 5000 },
  },
  derived: { Ux: "speed*cos(radians(aoa))" },
  objectives: {
    Cl: { series: "forceCoeffs.Cl", reduce: "mean_last", n: 20 },
    LD: { expr: "Cl / Cd" },
  },
  demo: { parameters: { aoa: { values: [-4, 0, 4] } }, combine: "grid" },
  placeholders: {},
  inspection: null,
};

function form(patch: (f: WizardForm) => void = () => {}): WizardForm {
  const f = formFromTemplate(airfoil, { name: "polar" });
  patch(f);
  return f;
}
const row = (f: WizardForm, name: string) => f.parameters.find((r) => r.name === name)!;

describe("the wizard's spec", () => {
  it("starts from the template's demo sweep and leaves defaults to the template", () => {
    const { spec, errors } = toSpec(form());
    expect(errors).toEqual({});
    expect(spec).toMatchObject({
      name: "polar",
      template: "airfoil2d",
      combine: "grid",
      parameters: { aoa: { values: [-4, 0, 4] } },
      resources: { processes: 1, nodes: 1, memory_gb: 1 },
      objectives: {
        Cl: { series: "forceCoeffs.Cl", reduce: "mean_last", n: 20 },
        LD: { expr: "Cl / Cd" },
      },
    });
    expect(spec.parameters).not.toHaveProperty("speed"); // unchanged default: not written
    expect(spec).not.toHaveProperty("convergence"); // nothing switched on: key omitted
  });

  it("writes every form of a parameter", () => {
    const { spec, errors } = toSpec(
      form((f) => {
        Object.assign(row(f, "aoa"), { mode: "range", start: "-4", stop: "12", step: "2" });
        Object.assign(row(f, "speed"), { mode: "linspace", start: "20", stop: "32", count: "3" });
        Object.assign(row(f, "iterations"), { mode: "fixed", value: "60" });
      }),
    );
    expect(errors).toEqual({});
    expect(spec.parameters).toEqual({
      aoa: { range: [-4, 12, 2] },
      speed: { linspace: [20, 32, 3] },
      iterations: { value: 60 },
    });
  });

  it("samples only in a sampled study", () => {
    const f = form((x) => Object.assign(row(x, "aoa"), { mode: "sampled", min: "-5", max: "15" }));
    expect(toSpec(f).errors["parameters.aoa"]).toMatch(/sampled study/);
    f.combine = "lhs";
    f.samples = "40";
    const { spec, errors } = toSpec(f);
    expect(errors).toEqual({});
    expect(spec).toMatchObject({
      combine: "lhs",
      samples: 40,
      parameters: { aoa: { min: -5, max: 15 } },
    });
  });

  it("names the offending input while the user types", () => {
    const { errors } = toSpec(
      form((f) => {
        row(f, "aoa").values = "";
        Object.assign(row(f, "speed"), { mode: "range", start: "10", stop: "0", step: "2" });
        f.derived = [{ key: "d", name: "2bad", expr: "aoa" }];
        f.processes = 2;
        f.nodes = 3;
        f.name = "";
      }),
    );
    expect(errors["parameters.aoa"]).toMatch(/at least one value/);
    expect(errors["parameters.speed"]).toMatch(/never reaches/);
    expect(errors["derived.2bad"]).toMatch(/identifiers/);
    expect(errors["resources.nodes"]).toMatch(/cannot exceed/);
    expect(errors.name).toBeDefined();
  });

  it("writes the convergence policy only when it differs from the portal's default", () => {
    const stopNan = toSpec(form((f) => (f.convergence.nan = false))).spec.convergence;
    expect(stopNan).toEqual({ diverge: { nan: false } });
    const { spec, errors } = toSpec(
      form((f) => {
        f.convergence = {
          ...f.convergence,
          residualAboveOn: true,
          residualsBelowOn: true,
          objectiveOn: true,
          objectiveSeries: "forceCoeffs.Cl",
          window: "50",
          tolerance: "1e-3",
          minIterations: "20",
          maxWallOn: true,
          maxWallMinutes: "30",
        };
      }),
    );
    expect(errors).toEqual({});
    expect(spec.convergence).toEqual({
      diverge: { nan: true, residual_above: 1000 },
      converge: {
        residuals_below: 1e-5,
        objective: { series: "forceCoeffs.Cl", window: 50, tolerance: 1e-3 },
      },
      min_iterations: 20,
      max_wall_seconds: 1800,
    });
  });

  it("reads a saved spec back into the same form", () => {
    const first = toSpec(
      form((f) => {
        Object.assign(row(f, "aoa"), { mode: "linspace", start: "0", stop: "10", count: "6" });
        f.derived = [{ key: "d", name: "Re", expr: "speed * 35.05 / 1e-5" }];
        f.convergence.maxWallOn = true;
        f.convergence.residualsBelowOn = true;
      }),
    ).spec;
    const again = toSpec(formFromSpec(first, airfoil)).spec;
    expect(again).toEqual(first);
  });

  it("reads a spec written by hand, whose optional fields take the schema's defaults", () => {
    const f = formFromSpec(
      {
        name: "by-hand",
        template: "airfoil2d",
        parameters: { aoa: [0, 5], speed: 30 },
        objectives: { Cd: { series: "forceCoeffs.Cd" } },
        convergence: { converge: { objective: { series: "forceCoeffs.Cl" } } },
      },
      airfoil,
    );
    expect(row(f, "aoa")).toMatchObject({ mode: "values", values: "0, 5" });
    expect(row(f, "speed")).toMatchObject({ mode: "fixed", value: "30" });
    expect(f.objectives).toMatchObject([{ name: "Cd", kind: "series", reduce: "last" }]);
    expect(f.convergence).toMatchObject({ objectiveOn: true, window: "50", tolerance: "1e-4" });
  });

  it("asks for warm starts only when switched on, and only of a steady solver", () => {
    expect(toSpec(form()).spec).not.toHaveProperty("warm_start"); // off by default
    const warm = toSpec(form((f) => (f.warmStart = true)));
    expect(warm.errors).toEqual({});
    expect(warm.spec.warm_start).toBe(true);
    expect(specToYaml(warm.spec)).toContain("warm_start: true");
    // buoyantSimpleFoam is of simpleFoam's kin; pimpleFoam is transient: the switch, hidden
    // for it, asks nothing the API would refuse
    expect(
      toSpec(form((f) => Object.assign(f, { warmStart: true, solver: "buoyantSimpleFoam" }))).spec
        .warm_start,
    ).toBe(true);
    expect(
      toSpec(form((f) => Object.assign(f, { warmStart: true, solver: "pimpleFoam" }))).spec,
    ).not.toHaveProperty("warm_start");
  });

  it("keeps a saved spec's warm start through the form", () => {
    const saved = toSpec(form((f) => (f.warmStart = true))).spec;
    const f = formFromSpec(saved, airfoil);
    expect(f.warmStart).toBe(true);
    expect(toSpec(f).spec).toEqual(saved);
    expect(formFromSpec({ ...saved, warm_start: false }, airfoil).warmStart).toBe(false);
  });

  it("counts the values of a row", () => {
    const f = form();
    expect(rowCount(row(f, "aoa"))).toBe(3);
    expect(rowCount({ ...row(f, "aoa"), mode: "range", start: "0", stop: "1", step: "0.25" })).toBe(
      5,
    );
    expect(
      rowCount({ ...row(f, "aoa"), mode: "range", start: "0", stop: "1", step: "0" }),
    ).toBeNull();
  });

  it("sends server errors to the step and input that hold the field", () => {
    expect(stepOfField("parameters.aoa")).toBe(1);
    expect(stepOfField("derived.Ux")).toBe(1);
    expect(stepOfField("resources.processes")).toBe(2);
    expect(stepOfField("warm_start")).toBe(2);
    expect(stepOfField("objectives.LD.expr")).toBe(3);
    expect(stepOfField("convergence")).toBe(3);
    expect(stepOfField("template")).toBe(0);
    expect(errorAt({ "objectives.LD.expr": "unknown name Cx" }, "objectives.LD")).toBe(
      "unknown name Cx",
    );
    expect(errorAt({ "parameters.aoa": "x" }, "parameters.a")).toBeUndefined();
  });
});

describe("the quota impact sentence", () => {
  const impact = {
    per_run: { cores: 4, memory_gb: 2, nodes: 1 },
    total: { cores: 480, memory_gb: 240, nodes: 120 },
    limits: { cores: 64, memory_gb: 256, nodes: 16, runs: 16, queued_runs: 100, storage_gb: 50 },
    in_use: { cores: 0, memory_gb: 0, nodes: 0, runs: 0, queued_runs: 0, storage_gb: 0 },
    concurrent_runs: 16,
    limited_by: "your quota of 64 cores",
    refused_by: "",
    waves: 8,
    fits: true,
    storage_full: false,
    problem: null,
    summary: "",
  };
  it("says how many run at once, what sets that number, and how many waves", () => {
    expect(impactSentence(120, impact)).toBe(
      "120 runs × 4 cores: 16 at a time (set by your quota of 64 cores), about 8 waves",
    );
    // the backend, not the tenant's quota, holds one run at a time: said as such
    expect(
      impactSentence(31, {
        ...impact,
        limits: { ...impact.limits, cores: 4 },
        concurrent_runs: 1,
        limited_by: "backend local's 2 cores",
        waves: 31,
      }),
    ).toBe("31 runs × 4 cores: 1 at a time (set by backend local's 2 cores), about 31 waves");
    expect(impactSentence(3, impact)).toBe("3 runs × 4 cores: all at once");
  });
  it("names the limit a single run does not fit: the backend or the tenant's quota", () => {
    const refused = { ...impact, fits: false, concurrent_runs: 0, limited_by: "" };
    expect(impactSentence(3, { ...refused, refused_by: "backend local's 2 cores" })).toBe(
      "3 runs × 4 cores: a single run does not fit backend local's 2 cores",
    );
    expect(impactSentence(3, { ...refused, refused_by: "your quota of 2 cores" })).toBe(
      "3 runs × 4 cores: a single run does not fit your quota of 2 cores",
    );
  });
});
