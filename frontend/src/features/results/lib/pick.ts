import type { RunFields } from "../api/results";

export const REGION_LABELS: Record<string, string> = {
  domain: "Whole domain",
  body: "Near the body",
};

/** Which field and region to show: the user's pick while it exists, else a default. */
export function pickField(index: RunFields | undefined, wanted: string | null): string | null {
  const names = index?.fields.map((f) => f.name) ?? [];
  if (wanted && names.includes(wanted)) return wanted;
  return names.includes("mag(U)") ? "mag(U)" : (names[0] ?? null);
}

export function pickRegion(index: RunFields | undefined, wanted: string | null): string | null {
  const names = index?.regions.map((r) => r.name) ?? [];
  if (wanted && names.includes(wanted)) return wanted;
  return names.includes("body") ? "body" : (names[0] ?? null);
}

export function planeCaption(index: RunFields): string {
  const plane = index.plane;
  const where =
    index.kind === "2d"
      ? "2-D case"
      : `cutting plane ${plane?.normal ?? "z"} = ${plane?.at != null ? Number(plane.at.toPrecision(4)) : "?"}`;
  return `Final fields at time ${index.time ?? "?"} (${where}), sampled on a grid from cell values.`;
}

/** Names present in every list, in the first list's order. */
export function common(lists: string[][]): string[] {
  if (!lists.length) return [];
  return lists[0]!.filter((n) => lists.every((l) => l.includes(n)));
}

/** The default axes: a drag polar (Cl against Cd) when the study has both. */
export function defaultAxes(objectives: string[]): [string, string] {
  if (objectives.includes("Cd") && objectives.includes("Cl")) return ["Cd", "Cl"];
  return [objectives[0] ?? "", objectives[1] ?? objectives[0] ?? ""];
}
