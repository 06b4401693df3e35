import {
  ActionIcon,
  Badge,
  Button,
  Checkbox,
  Collapse,
  Group,
  Paper,
  SegmentedControl,
  Select,
  Stack,
  Table,
  Text,
  TextInput,
  Tooltip,
} from "@mantine/core";
import { IconInfoCircle, IconPlus, IconTrash } from "@/components/icons";
import { useState } from "react";
import { formatInt } from "@/lib/format";
import { errorAt } from "@/lib/spec";
import {
  newKey,
  paramRow,
  type Combine,
  type DerivedRow,
  type ParamMode,
  type ParamRow,
  type WizardForm,
} from "../lib/form";
import { rowsForAdaptive } from "../lib/adaptive";
import { isSampled, rowCount } from "../lib/to-spec";
import { AdaptiveFields } from "./adaptive-fields";

const MODES: { value: ParamMode; label: string }[] = [
  { value: "fixed", label: "Fixed" },
  { value: "values", label: "List" },
  { value: "range", label: "Range" },
  { value: "linspace", label: "Linspace" },
  { value: "sampled", label: "Sampled" },
];

const COMBINE_HELP: Record<Combine, string> = {
  grid: "every combination of the varied parameters (a full factorial grid)",
  zip: "values paired by position: the 1st of each, the 2nd of each, …",
  lhs: "a Latin hypercube sample between each sampled parameter's min and max",
  random: "uniform random samples between each sampled parameter's min and max",
  adaptive:
    "a Latin hypercube first, then batches placed by a Gaussian-process surrogate of the objectives, between each sampled parameter's min and max",
};

export function ParameterEditor({
  form,
  update,
  errors,
  templateDerived,
}: {
  form: WizardForm;
  update: (patch: Partial<WizardForm>) => void;
  errors: Record<string, string>;
  templateDerived: Record<string, string>;
}) {
  const sampled = isSampled(form.combine);
  const setCombine = (combine: Combine) =>
    update(
      combine === "adaptive"
        ? { combine, parameters: rowsForAdaptive(form.parameters) }
        : { combine },
    );
  const setRow = (key: string, patch: Partial<ParamRow>) =>
    update({ parameters: form.parameters.map((r) => (r.key === key ? { ...r, ...patch } : r)) });
  const editableNames = form.source === "upload";

  return (
    <Stack gap="lg">
      <Stack gap={6}>
        <Group justify="space-between" align="flex-end" wrap="wrap">
          <div>
            <Text fw={600} size="sm">
              How values combine
            </Text>
            <Text size="xs" c="dimmed">
              {COMBINE_HELP[form.combine]}
            </Text>
          </div>
          <SegmentedControl
            value={form.combine}
            onChange={(v) => setCombine(v as Combine)}
            data={[
              { value: "grid", label: "Grid" },
              { value: "zip", label: "Zip" },
              { value: "lhs", label: "Latin hypercube" },
              { value: "random", label: "Random" },
              { value: "adaptive", label: "Adaptive (Gaussian-process surrogate)" },
            ]}
            aria-label="How parameter values combine"
          />
        </Group>
        {form.combine === "adaptive" && (
          <AdaptiveFields form={form} update={update} errors={errors} />
        )}
        {(form.combine === "lhs" || form.combine === "random") && (
          <Group gap="sm">
            <TextInput
              label="Samples"
              w={120}
              value={form.samples}
              onChange={(e) => update({ samples: e.currentTarget.value })}
              error={errors.samples}
            />
            <TextInput
              label="Seed"
              w={120}
              value={form.seed}
              onChange={(e) => update({ seed: e.currentTarget.value })}
              description="same seed, same points"
            />
          </Group>
        )}
      </Stack>

      {errors.parameters && (
        <Text c="red" size="sm" role="alert" data-testid="parameters-error">
          {errors.parameters}
        </Text>
      )}

      <Table.ScrollContainer minWidth={720}>
        <Table verticalSpacing={8} aria-label="Parameters" data-testid="parameter-table">
          <Table.Thead>
            <Table.Tr>
              <Table.Th w={200}>Parameter</Table.Th>
              <Table.Th w={130}>Mode</Table.Th>
              <Table.Th>Values</Table.Th>
              <Table.Th w={70} ta="right">
                Count
              </Table.Th>
              {editableNames && <Table.Th w={40} />}
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {form.parameters.map((row) => (
              <ParamRowView
                key={row.key}
                row={row}
                sampled={sampled}
                editableName={editableNames}
                error={errorAt(errors, `parameters.${row.name || row.key}`)}
                onChange={(patch) => setRow(row.key, patch)}
                onRemove={() =>
                  update({ parameters: form.parameters.filter((r) => r.key !== row.key) })
                }
              />
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      {editableNames && (
        <Button
          variant="subtle"
          size="xs"
          leftSection={<IconPlus size={14} />}
          onClick={() => update({ parameters: [...form.parameters, paramRow("")] })}
          w="fit-content"
        >
          Add parameter
        </Button>
      )}
      {form.parameters.length === 0 && (
        <Text size="sm" c="dimmed">
          This case has no parameters: the study makes one run.
        </Text>
      )}

      <DerivedEditor
        rows={form.derived}
        onChange={(derived) => update({ derived })}
        errors={errors}
        templateDerived={templateDerived}
      />
    </Stack>
  );
}

function ParamRowView({
  row,
  sampled,
  editableName,
  error,
  onChange,
  onRemove,
}: {
  row: ParamRow;
  sampled: boolean;
  editableName: boolean;
  error: string | undefined;
  onChange: (patch: Partial<ParamRow>) => void;
  onRemove: () => void;
}) {
  const def = row.def;
  const count = rowCount(row);
  const label = row.name || "parameter";
  const field = (
    key: keyof ParamRow,
    placeholder: string,
    w: number | string = 96,
    first = false,
  ) => (
    <TextInput
      size="xs"
      w={w}
      placeholder={placeholder}
      aria-label={`${label} ${placeholder}`}
      value={String(row[key] ?? "")}
      onChange={(e) => onChange({ [key]: e.currentTarget.value } as Partial<ParamRow>)}
      error={first ? error : !!error}
      data-testid={`param-${label}-${String(key)}`}
    />
  );
  return (
    <Table.Tr data-testid={`param-row-${label}`}>
      <Table.Td>
        {editableName ? (
          <TextInput
            size="xs"
            value={row.name}
            placeholder="name"
            aria-label="Parameter name"
            onChange={(e) => onChange({ name: e.currentTarget.value })}
          />
        ) : (
          <Stack gap={0}>
            <Group gap={4} wrap="nowrap">
              <Text fw={600} size="sm" ff="monospace">
                {row.name}
              </Text>
              {def?.unit ? (
                <Badge size="xs" variant="light" color="gray" radius="sm">
                  {def.unit}
                </Badge>
              ) : null}
              {def?.description && (
                <Tooltip label={def.description} multiline w={260} withArrow>
                  <IconInfoCircle
                    size={14}
                    color="var(--mantine-color-gray-6)"
                    aria-label={def.description}
                  />
                </Tooltip>
              )}
            </Group>
            {def && (def.min !== undefined || def.max !== undefined) && (
              <Text size="xs" c="dimmed">
                {def.min ?? "−∞"} … {def.max ?? "∞"}
                {def.default !== undefined ? ` · default ${def.default}` : ""}
              </Text>
            )}
          </Stack>
        )}
      </Table.Td>
      <Table.Td>
        <Select
          size="xs"
          data={MODES.filter((m) => m.value !== "sampled" || sampled || row.mode === "sampled")}
          value={row.mode}
          onChange={(v) => v && onChange({ mode: v as ParamMode })}
          allowDeselect={false}
          aria-label={`${label} mode`}
          data-testid={`param-${label}-mode`}
        />
      </Table.Td>
      <Table.Td>
        <Group gap={6} wrap="nowrap" align="flex-start">
          {row.mode === "fixed" &&
            (def?.choices?.length ? (
              <Select
                size="xs"
                w={180}
                data={def.choices.map(String)}
                value={row.value}
                onChange={(v) => onChange({ value: v ?? "" })}
                aria-label={`${label} value`}
                error={error}
              />
            ) : (
              field("value", "value", 160, true)
            ))}
          {row.mode === "values" &&
            field(
              "values",
              def?.choices?.length ? def.choices.join(", ") : "e.g. -4, 0, 4, 8",
              "100%",
              true,
            )}
          {row.mode === "range" && (
            <>
              {field("start", "start", 90, true)}
              {field("stop", "stop")}
              {field("step", "step")}
            </>
          )}
          {row.mode === "linspace" && (
            <>
              {field("start", "start", 90, true)}
              {field("stop", "stop")}
              {field("count", "count", 80)}
            </>
          )}
          {row.mode === "sampled" && (
            <>
              {field("min", "min", 90, true)}
              {field("max", "max")}
              <Checkbox
                size="xs"
                mt={6}
                label="whole numbers"
                checked={row.integer}
                onChange={(e) => onChange({ integer: e.currentTarget.checked })}
              />
            </>
          )}
        </Group>
      </Table.Td>
      <Table.Td ta="right" ff="monospace">
        <Text
          size="sm"
          ff="monospace"
          c={count === null ? "dimmed" : undefined}
          data-testid={`param-${label}-count`}
        >
          {row.mode === "sampled" ? "~" : count === null ? "?" : formatInt(count)}
        </Text>
      </Table.Td>
      {editableName && (
        <Table.Td>
          <ActionIcon
            variant="subtle"
            color="gray"
            onClick={onRemove}
            aria-label={`Remove ${label}`}
          >
            <IconTrash size={16} />
          </ActionIcon>
        </Table.Td>
      )}
    </Table.Tr>
  );
}

function DerivedEditor({
  rows,
  onChange,
  errors,
  templateDerived,
}: {
  rows: DerivedRow[];
  onChange: (rows: DerivedRow[]) => void;
  errors: Record<string, string>;
  templateDerived: Record<string, string>;
}) {
  const [showTemplate, setShowTemplate] = useState(false);
  const templateEntries = Object.entries(templateDerived);
  const set = (key: string, patch: Partial<DerivedRow>) =>
    onChange(rows.map((r) => (r.key === key ? { ...r, ...patch } : r)));
  return (
    <Paper withBorder p="md" radius="md">
      <Stack gap="sm">
        <Group justify="space-between">
          <div>
            <Text fw={600} size="sm">
              Derived values
            </Text>
            <Text size="xs" c="dimmed">
              Expressions over parameters, evaluated per run (sin, cos, radians, sqrt, exp, log, pi,
              min, max…). Case files can use them as {"{{ name }}"}.
            </Text>
          </div>
          <Button
            size="xs"
            variant="light"
            leftSection={<IconPlus size={14} />}
            onClick={() => onChange([...rows, { key: newKey(), name: "", expr: "" }])}
          >
            Add derived value
          </Button>
        </Group>
        {rows.map((d) => {
          const err = errorAt(errors, `derived.${d.name || d.key}`);
          return (
            <Group
              key={d.key}
              gap="xs"
              align="flex-start"
              wrap="nowrap"
              data-testid={`derived-row-${d.name}`}
            >
              <TextInput
                size="xs"
                w={160}
                placeholder="name"
                aria-label="Derived name"
                value={d.name}
                onChange={(e) => set(d.key, { name: e.currentTarget.value })}
                error={!!err}
                ff="monospace"
              />
              <Text mt={4}>=</Text>
              <TextInput
                size="xs"
                style={{ flex: 1 }}
                placeholder="speed*cos(radians(aoa))"
                aria-label={`Expression of ${d.name || "derived value"}`}
                value={d.expr}
                onChange={(e) => set(d.key, { expr: e.currentTarget.value })}
                error={err}
                styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }}
              />
              <ActionIcon
                variant="subtle"
                color="gray"
                mt={2}
                onClick={() => onChange(rows.filter((r) => r.key !== d.key))}
                aria-label={`Remove ${d.name || "derived value"}`}
              >
                <IconTrash size={16} />
              </ActionIcon>
            </Group>
          );
        })}
        {templateEntries.length > 0 && (
          <>
            <Button
              variant="subtle"
              size="compact-xs"
              onClick={() => setShowTemplate((s) => !s)}
              w="fit-content"
            >
              {showTemplate ? "Hide" : "Show"} the template's {templateEntries.length} derived
              values
            </Button>
            <Collapse in={showTemplate}>
              <Table fz="xs" ff="monospace" withRowBorders={false} verticalSpacing={2}>
                <Table.Tbody>
                  {templateEntries.map(([name, expr]) => (
                    <Table.Tr key={name}>
                      <Table.Td w={140}>{name}</Table.Td>
                      <Table.Td c="dimmed">{expr}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            </Collapse>
          </>
        )}
      </Stack>
    </Paper>
  );
}
