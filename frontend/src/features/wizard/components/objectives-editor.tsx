import {
  ActionIcon,
  Autocomplete,
  Button,
  Group,
  Select,
  Stack,
  Table,
  Text,
  TextInput,
} from "@mantine/core";
import { IconPlus, IconTrash } from "@/components/icons";
import { newKey, type ObjectiveRow, type WizardForm } from "../lib/form";
import { seriesProblem, type OfferedSeries } from "../lib/series";
import { errorAt } from "../lib/to-spec";

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
  const set = (key: string, patch: Partial<ObjectiveRow>) =>
    update({ objectives: form.objectives.map((o) => (o.key === key ? { ...o, ...patch } : o)) });
  const hints = offered
    ? [
        // the inspected series, and those chosen under an open prefix (a template's own)
        ...new Set([
          ...offered.series,
          ...form.objectives.map((o) => o.series).filter((s) => s && !seriesProblem(s, offered)),
        ]),
      ]
    : [...new Set([...form.objectives.map((o) => o.series).filter(Boolean), ...SERIES_HINTS])];
  return (
    <Stack gap="sm">
      <Text size="xs" c="dimmed">
        An objective is one number per run, computed when it ends: a series reduced to its last
        value, the mean of its last n points, its min or max; or an expression over other
        objectives.
      </Text>
      <Table.ScrollContainer minWidth={640}>
        <Table verticalSpacing={6} aria-label="Objectives">
          <Table.Thead>
            <Table.Tr>
              <Table.Th w={130}>Name</Table.Th>
              <Table.Th w={120}>Kind</Table.Th>
              <Table.Th>Definition</Table.Th>
              <Table.Th w={40} />
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {form.objectives.map((o) => {
              const base = `objectives.${o.name || o.key}`;
              // a problem with the name shows under the name (the server's "a Python keyword"
              // is one too), the others under the definition
              const keyword =
                errors[base] && /keyword/.test(errors[base]) ? errors[base] : undefined;
              const nameErr = errors[`${base}.name`] ?? keyword;
              const err = nameErr
                ? undefined
                : (errorAt(
                    Object.fromEntries(
                      Object.entries(errors).filter(([k]) => k !== `${base}.name`),
                    ),
                    base,
                  ) ??
                  (o.kind === "series" ? seriesProblem(o.series, offered) : null) ??
                  undefined);
              return (
                <Table.Tr key={o.key} data-testid={`objective-row-${o.name}`}>
                  <Table.Td>
                    <TextInput
                      size="xs"
                      value={o.name}
                      onChange={(e) => set(o.key, { name: e.currentTarget.value })}
                      aria-label="Objective name"
                      error={nameErr ?? !!err}
                      styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }}
                    />
                  </Table.Td>
                  <Table.Td>
                    <Select
                      size="xs"
                      data={[
                        { value: "series", label: "Series" },
                        { value: "expr", label: "Expression" },
                      ]}
                      value={o.kind}
                      onChange={(v) => v && set(o.key, { kind: v as ObjectiveRow["kind"] })}
                      allowDeselect={false}
                      aria-label={`${o.name} kind`}
                    />
                  </Table.Td>
                  <Table.Td>
                    {o.kind === "series" ? (
                      <Group gap={6} wrap="nowrap" align="flex-start">
                        <Autocomplete
                          size="xs"
                          style={{ flex: 1 }}
                          data={hints}
                          value={o.series}
                          onChange={(v) => set(o.key, { series: v })}
                          placeholder={offered?.series[0] ?? "forceCoeffs.Cl"}
                          aria-label={`${o.name} series`}
                          limit={200}
                          error={err}
                        />
                        <Select
                          size="xs"
                          w={150}
                          data={[
                            { value: "last", label: "last value" },
                            { value: "mean_last", label: "mean of last n" },
                            { value: "min", label: "minimum" },
                            { value: "max", label: "maximum" },
                          ]}
                          value={o.reduce}
                          onChange={(v) => v && set(o.key, { reduce: v as ObjectiveRow["reduce"] })}
                          allowDeselect={false}
                          aria-label={`${o.name} reduction`}
                        />
                        {o.reduce === "mean_last" && (
                          <TextInput
                            size="xs"
                            w={64}
                            value={o.n}
                            onChange={(e) => set(o.key, { n: e.currentTarget.value })}
                            aria-label={`${o.name} n`}
                            leftSection={<Text size="xs">n</Text>}
                          />
                        )}
                      </Group>
                    ) : (
                      <TextInput
                        size="xs"
                        value={o.expr}
                        onChange={(e) => set(o.key, { expr: e.currentTarget.value })}
                        placeholder="Cl / Cd"
                        aria-label={`${o.name} expression`}
                        error={err}
                        styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }}
                      />
                    )}
                  </Table.Td>
                  <Table.Td>
                    <ActionIcon
                      variant="subtle"
                      color="gray"
                      onClick={() =>
                        update({ objectives: form.objectives.filter((x) => x.key !== o.key) })
                      }
                      aria-label={`Remove objective ${o.name}`}
                    >
                      <IconTrash size={16} />
                    </ActionIcon>
                  </Table.Td>
                </Table.Tr>
              );
            })}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      {form.objectives.length === 0 && (
        <Text size="sm" c="dimmed">
          No objectives: runs still record their series, but the study has no result columns.
        </Text>
      )}
      <Button
        variant="subtle"
        size="xs"
        leftSection={<IconPlus size={14} />}
        w="fit-content"
        onClick={() =>
          update({
            objectives: [
              ...form.objectives,
              {
                key: newKey(),
                name: "",
                kind: "series",
                series: "",
                reduce: "mean_last",
                n: "20",
                expr: "",
              },
            ],
          })
        }
      >
        Add objective
      </Button>
    </Stack>
  );
}
