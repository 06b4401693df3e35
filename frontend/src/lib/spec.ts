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

/** Like the backend's `_clean`: 0.30000000000000004 → 0.3 (12 decimals), as its runs hold them. */
function clean(value: number): number {
  return Math.abs(value) < 1e15 ? Number(value.toFixed(12)) : value;
}

/**
 * The values a parameter takes, as the backend expands its spec (studies/space.py): a list,
 * `values`, `value`, `range` or `linspace`; null for sampling bounds (`min`/`max`).
 */
export function parameterValues(p: ParameterSpec): Scalar[] | null {
  if (Array.isArray(p)) return p;
  if (p === null || typeof p !== "object") return [p];
  if ("values" in p) return p.values;
  if ("value" in p) return [p.value];
  if ("range" in p) {
    const [start, stop, step] = p.range as [number, number, number];
    if (!step || (stop - start) * step < 0) return [];
    const count = Math.floor((stop - start) / step + 1e-9) + 1;
    return Array.from({ length: Math.min(count, 1_000_000) }, (_, i) => clean(start + i * step));
  }
  if ("linspace" in p) {
    const [start, stop, num] = p.linspace as [number, number, number];
    if (num <= 1) return [clean(start)];
    return Array.from({ length: num }, (_, i) => clean(start + ((stop - start) * i) / (num - 1)));
  }
  return null;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** Whether `name` can name a parameter, a derived value or an objective in the spec. */
export function isIdentifier(name: string): boolean {
  return IDENTIFIER.test(name);
}

/** The error for one input: exact field, or a deeper one (`objectives.LD.expr` for LD). */
export function errorAt(errors: Record<string, string>, field: string): string | undefined {
  if (errors[field]) return errors[field];
  const prefix = `${field}.`;
  for (const [k, v] of Object.entries(errors)) if (k.startsWith(prefix)) return v;
  return undefined;
}
