import { describe, expect, it } from "vitest";
import { specToCurl, specToYaml } from "./spec-text";

const spec = {
  name: "it's a sweep",
  template: "airfoil2d",
  parameters: { aoa: { values: [0, 4] } },
};

describe("spec as text", () => {
  it("writes YAML the CLI reads", () => {
    const yaml = specToYaml(spec);
    expect(yaml).toContain("template: airfoil2d");
    expect(yaml).toMatch(/aoa:\n\s+values:\n\s+- 0\n\s+- 4/);
  });

  it("writes a curl command that survives the shell", () => {
    const curl = specToCurl(spec);
    expect(curl).toContain("/api/v1/studies/");
    expect(curl).toContain("Authorization: Token $WINDTUNNEL_TOKEN");
    expect(curl).toContain(`it'\\''s a sweep`); // the quote is escaped for single-quoted bash
  });
});
