import type { ParameterSpec, Scalar, StudySpec } from "./types";

/** A parameter that takes one value in every run (`{value}` or a one-element list). */
export function fixedValue(p: ParameterSpec): Scalar | undefined {
  if (Array.isArray(p)) return p.length === 1 ? p[0] : undefined;
  if (p === null || typeof p !== "object") return p;
  if ("value" in p) return p.value;
  if ("values" in p && p.values.length === 1) return p.values[0];
  if ("linspace" in p && p.linspace[2] === 1) return p.linspace[0];
  return undefined;
}

/** The study's parameters split into those that vary across runs and those held fixed. */
export function splitParameters(spec: StudySpec): { varied: string[]; fixed: [string, Scalar][] } {
  const varied: string[] = [];
  const fixed: [string, Scalar][] = [];
  for (const [name, p] of Object.entries(spec.parameters ?? {})) {
    const v = fixedValue(p);
    if (v === undefined) varied.push(name);
    else fixed.push([name, v]);
  }
  return { varied, fixed };
}
