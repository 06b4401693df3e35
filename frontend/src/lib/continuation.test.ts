import { describe, expect, it } from "vitest";
import { ApiError } from "./api-client";
import {
  checkDraft,
  continueBody,
  type ContinueDraft,
  describeResume,
  emptyDraft,
  newSettingRow,
  placeError,
  resumedFromLine,
  skippedOf,
} from "./continuation";

const draft = (d: Partial<ContinueDraft>): ContinueDraft => ({ ...emptyDraft(), ...d });

const refusal = (field: string | null, message: string, details?: unknown) =>
  new ApiError(400, { code: "invalid", message, field, details }, "");

describe("a continuation's draft", () => {
  it("leaves the API's defaults out of the request: the latest write, no setting, blank rows", () => {
    expect(continueBody(draft({ iterations: 500 }))).toEqual({ iterations: 500 });
    expect(continueBody(draft({ iterations: "", time: "latest" }))).toEqual({});
    expect(
      continueBody(
        draft({
          time: "0.25",
          settings: [
            newSettingRow({ key: " relaxationFactors.equations.U ", value: " 0.5 " }),
            newSettingRow(),
            newSettingRow({ file: "fvSchemes", key: "ddtSchemes.default", value: "Euler" }),
          ],
        }),
      ),
    ).toEqual({
      time: "0.25",
      settings: {
        fvSolution: { "relaxationFactors.equations.U": "0.5" },
        fvSchemes: { "ddtSchemes.default": "Euler" },
      },
    });
  });

  it("asks for whole iterations in the API's range, and for each setting's key and value", () => {
    const key = newSettingRow({ value: "0.5" });
    const value = newSettingRow({ key: "deltaT", file: "controlDict" });
    const twice = newSettingRow({ key: "deltaT", file: "controlDict", value: "0.1" });
    const errors = checkDraft(draft({ iterations: 2.5, settings: [key, value, twice] }), {
      iterationsRequired: true,
    });
    expect(errors).toEqual({
      iterations: "a whole number from 1 to 10,000,000",
      [`setting.${key.id}.key`]: "a dotted key, e.g. relaxationFactors.equations.U",
      [`setting.${value.id}.value`]: "a value, e.g. 0.5 or Euler",
      [`setting.${twice.id}.key`]: "controlDict deltaT is already set above",
    });
    expect(checkDraft(draft({}), { iterationsRequired: true })).toHaveProperty("iterations");
    expect(checkDraft(draft({}), { iterationsRequired: false })).toEqual({});
    expect(checkDraft(draft({ iterations: 10_000_001 }), { iterationsRequired: false })).toEqual({
      iterations: "a whole number from 1 to 10,000,000",
    });
  });
});

describe("the API's refusal of a continuation", () => {
  const row = newSettingRow({ key: "relaxationFactors.equations.U", value: "half" });
  const d = draft({ iterations: 1, settings: [row] });

  it("shows under the field it names, without repeating the field", () => {
    expect(
      placeError(refusal("iterations", "iterations: a whole number from 1 to 10,000,000"), d),
    ).toEqual({ iterations: "a whole number from 1 to 10,000,000" });
    expect(
      placeError(
        refusal(
          "settings.fvSolution.relaxationFactors.equations.U",
          "settings.fvSolution.relaxationFactors.equations.U: 'half' is not allowed",
        ),
        d,
      ),
    ).toEqual({ [`setting.${row.id}.value`]: "'half' is not allowed" });
  });

  it("puts a bad key on the row its message names", () => {
    const bad = newSettingRow({ key: "relaxation Factors", value: "0.5" });
    expect(
      placeError(
        refusal("settings.fvSolution", "settings.fvSolution.relaxation Factors: a dotted key"),
        draft({ settings: [row, bad] }),
      ),
    ).toEqual({ [`setting.${bad.id}.key`]: "a dotted key" });
  });

  it("is the form's alert when it names no field of the form", () => {
    expect(placeError(refusal("run", "the run is running"), d)).toEqual({
      form: "the run is running",
    });
    expect(placeError(refusal("settings", "settings: at most 20 keys"), d)).toEqual({
      settings: "at most 20 keys",
    });
    expect(placeError(new TypeError("offline"), d)).toEqual({
      form: "The server cannot be reached. Check your connection.",
    });
    expect(placeError(null, d)).toEqual({});
  });

  it("lists the runs a selection skipped, from its details", () => {
    const skipped = [{ run: "r4", index: 4, reason: "the run is running" }];
    expect(skippedOf(refusal("runs", "none of the 1 runs can go on", { skipped }))).toEqual(
      skipped,
    );
    expect(skippedOf(refusal("runs", "no details"))).toEqual([]);
  });
});

describe("what a run went on from", () => {
  it("says the write, the attempt, the iterations added, what changed and who asked", () => {
    expect(
      resumedFromLine({
        attempt: 1,
        time: "0.5",
        iterations: 500,
        settings: { fvSolution: { "relaxationFactors.equations.U": "0.5" } },
        by: "ada",
        source: null,
        source_index: null,
      }),
    ).toBe(
      "Went on from time 0.5 of attempt 1 (+500 iterations; changed: fvSolution relaxationFactors.equations.U = 0.5) — by ada",
    );
  });

  it("says a restart without added iterations runs on to the end time", () => {
    expect(describeResume({ attempt: 2, time: "0.1", iterations: null, settings: {} })).toBe(
      "time 0.1 of attempt 2 (to its end time)",
    );
    expect(
      describeResume({ attempt: 2, time: "0.1", iterations: 1, settings: {}, end_time: 0.4 }),
    ).toBe("time 0.1 of attempt 2 (+1 iteration)");
  });

  it("names the neighbouring run a warm start took its fields from, and the portal when no one asked", () => {
    expect(
      resumedFromLine({
        attempt: 1,
        time: "120",
        iterations: null,
        settings: {},
        by: "",
        source: "r4",
        source_index: 4,
      }),
    ).toBe("Started from the converged fields of run 4 at time 120 — by the portal");
    expect(
      describeResume({
        attempt: 1,
        time: "40",
        iterations: null,
        settings: {},
        source: "r4",
        source_index: 4,
        blend: { source: "r3", source_index: 3, weight: -1 },
      }),
    ).toBe("run 4 at time 40 (blended with run 3, weight -1)");
  });

  it("says when a warm start's fields came from another mesh through mapFields", () => {
    expect(
      resumedFromLine({
        attempt: 1,
        time: "60",
        iterations: null,
        settings: {},
        by: "",
        source: "r0",
        source_index: 0,
        mapped: true,
      }),
    ).toBe(
      "Started from the converged fields of run 0 at time 60 (another mesh, mapped by mapFields) — by the portal",
    );
  });
});
