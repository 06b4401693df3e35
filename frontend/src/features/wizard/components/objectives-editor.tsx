import { Stack, Text } from "@mantine/core";
import { ObjectivesTable } from "@/components/objectives-table";
import type { WizardForm } from "../lib/form";
import { seriesProblem, type OfferedSeries } from "../lib/series";

/** Offered when the case's series are not known (it could not be inspected). */
const SERIES_HINTS = [
  "forceCoeffs.Cl",
  "forceCoeffs.Cd",
  "forceCoeffs.CmPitch",
  "forceCoeffs.Cs",
  "forces.total_x",
  "residual.p",
  "residual.Ux",
  "continuity.local",
  "execution.time",
];

export function ObjectivesEditor({
  form,
  update,
  errors,
  offered = null,
}: {
  form: WizardForm;
  update: (patch: Partial<WizardForm>) => void;
  errors: Record<string, string>;
  /** The series the case's inspection says its runs send: the only ones offered. */
  offered?: OfferedSeries | null;
}) {
  const chosen = form.objectives.map((o) => o.series).filter(Boolean);
  const hints = offered
    ? // the inspected series, and those chosen under an open prefix (a template's own)
      [...new Set([...offered.series, ...chosen.filter((s) => !seriesProblem(s, offered))])]
    : [...new Set([...chosen, ...SERIES_HINTS])];
  return (
    <Stack gap="sm">
      <Text size="xs" c="dimmed">
        An objective is one number per run, computed when it ends: a series reduced to its last
        value, the mean of its last n points, its min or max; or an expression over other
        objectives.
      </Text>
      <ObjectivesTable
        label="Objectives"
        rows={form.objectives}
        onChange={(objectives) => update({ objectives })}
        errors={errors}
        hints={hints}
        placeholder={offered?.series[0]}
        seriesProblem={(s) => seriesProblem(s, offered)}
      />
    </Stack>
  );
}
