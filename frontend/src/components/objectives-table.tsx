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
import { newObjectiveRow, type ObjectiveRow } from "@/lib/objectives";
import { errorAt } from "@/lib/spec";

const KINDS = [
  { value: "series", label: "Series" },
  { value: "expr", label: "Expression" },
];
const REDUCTIONS = [
  { value: "last", label: "last value" },
  { value: "mean_last", label: "mean of last n" },
  { value: "min", label: "minimum" },
  { value: "max", label: "maximum" },
];
const MONOSPACE = { input: { fontFamily: "var(--mantine-font-family-monospace)" } };

/**
 * A study's objectives as an editable table, one row each: a series reduced to one number,
 * or an expression over other objectives. Errors are keyed like the server's
 * (`objectives.<name>.name`, `objectives.<name>`…); a problem with the name shows under the
 * name, any other under the definition.
 */
export function ObjectivesTable({
  rows,
  onChange,
  errors,
  hints,
  placeholder = "forceCoeffs.Cl",
  seriesProblem,
  label,
}: {
  rows: ObjectiveRow[];
  onChange: (rows: ObjectiveRow[]) => void;
  errors: Record<string, string>;
  /** the series offered while typing one */
  hints: string[];
  placeholder?: string;
  /** what is wrong with a series the case may not write, when that is known */
  seriesProblem?: (series: string) => string | null;
  /** the table's accessible name */
  label: string;
}) {
  const set = (key: string, patch: Partial<ObjectiveRow>) =>
    onChange(rows.map((o) => (o.key === key ? { ...o, ...patch } : o)));
  return (
    <Stack gap="sm">
      <Table.ScrollContainer minWidth={640}>
        <Table verticalSpacing={6} aria-label={label}>
          <Table.Thead>
            <Table.Tr>
              <Table.Th w={130}>Name</Table.Th>
              <Table.Th w={120}>Kind</Table.Th>
              <Table.Th>Definition</Table.Th>
              <Table.Th w={40} />
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((o) => {
              const base = `objectives.${o.name || o.key}`;
              // the server's "a Python keyword" is a problem with the name too
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
                  (o.kind === "series" ? seriesProblem?.(o.series) : null) ??
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
                      styles={MONOSPACE}
                    />
                  </Table.Td>
                  <Table.Td>
                    <Select
                      size="xs"
                      data={KINDS}
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
                          placeholder={placeholder}
                          aria-label={`${o.name} series`}
                          limit={200}
                          error={err}
                        />
                        <Select
                          size="xs"
                          w={150}
                          data={REDUCTIONS}
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
                        styles={MONOSPACE}
                      />
                    )}
                  </Table.Td>
                  <Table.Td>
                    <ActionIcon
                      variant="subtle"
                      color="gray"
                      onClick={() => onChange(rows.filter((x) => x.key !== o.key))}
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
      {rows.length === 0 && (
        <Text size="sm" c="dimmed">
          No objectives: runs still record their series, but the study has no result columns.
        </Text>
      )}
      <Button
        variant="subtle"
        size="xs"
        leftSection={<IconPlus size={14} />}
        w="fit-content"
        onClick={() => onChange([...rows, newObjectiveRow()])}
      >
        Add objective
      </Button>
    </Stack>
  );
}
