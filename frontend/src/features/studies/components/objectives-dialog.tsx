import {
  ActionIcon,
  Alert,
  Autocomplete,
  Button,
  Group,
  Modal,
  Select,
  Stack,
  Table,
  Text,
  TextInput,
} from "@mantine/core";
import { useState } from "react";
import { IconAlertTriangle, IconPlus, IconTrash } from "@/components/icons";
import { ApiError, errorMessage } from "@/lib/api-client";
import type { ObjectiveSpec, Study } from "@/lib/types";
import type { TrustRules } from "../api/studies";
import { useStudyInspection, useUpdateObjectives } from "../hooks/use-studies";

type Reduce = "last" | "mean_last" | "min" | "max";
interface Row {
  key: number;
  name: string;
  kind: "series" | "expr";
  series: string;
  reduce: Reduce;
  n: string;
  expr: string;
}

let nextKey = 1;

function rowsOf(objectives: Record<string, ObjectiveSpec>): Row[] {
  return Object.entries(objectives).map(([name, o]) =>
    "expr" in o
      ? { key: nextKey++, name, kind: "expr", series: "", reduce: "last", n: "20", expr: o.expr }
      : {
          key: nextKey++,
          name,
          kind: "series",
          series: o.series,
          reduce: o.reduce ?? "last",
          n: String(o.n ?? 20),
          expr: "",
        },
  );
}

function specOf(rows: Row[]): Record<string, ObjectiveSpec> {
  const out: Record<string, ObjectiveSpec> = {};
  for (const r of rows) {
    if (!r.name.trim()) continue;
    out[r.name.trim()] =
      r.kind === "expr"
        ? { expr: r.expr }
        : r.reduce === "mean_last"
          ? { series: r.series.trim(), reduce: r.reduce, n: Number(r.n) }
          : { series: r.series.trim(), reduce: r.reduce };
  }
  return out;
}

/**
 * Edit or add a study's objectives after its runs: the portal recomputes every finished run's
 * objectives (and trust flag) from the series it stored, without running anything again.
 */
export function ObjectivesDialog({
  study,
  opened,
  onClose,
}: {
  study: Study;
  opened: boolean;
  onClose: () => void;
}) {
  const [rows, setRows] = useState<Row[]>(() => rowsOf(study.objectives ?? {}));
  const rules = ((study.spec as { trust?: TrustRules }).trust ?? {}) as TrustRules;
  const [residualsBelow, setResidualsBelow] = useState(String(rules.residuals_below ?? 0.001));
  const [driftBelow, setDriftBelow] = useState(String(rules.drift_below ?? 0.001));
  const inspection = useStudyInspection(study, opened);
  const save = useUpdateObjectives();
  const series = inspection.data?.series ?? [];
  const set = (key: number, patch: Partial<Row>) =>
    setRows((rs) => rs.map((r) => (r.key === key ? { ...r, ...patch } : r)));
  const error = save.error;
  const field = error instanceof ApiError ? error.field : null;

  return (
    <Modal opened={opened} onClose={onClose} title="Edit objectives" size="xl" centered>
      <Stack gap="sm">
        <Text size="sm" c="dimmed">
          Objectives are computed from the series each run stored: changing them recomputes the
          finished runs (and their trust flag) without running anything again. Runs still going use
          the new objectives when they end.
        </Text>
        <Table verticalSpacing={6} aria-label="Objectives to edit">
          <Table.Tbody>
            {rows.map((r) => (
              <Table.Tr key={r.key}>
                <Table.Td w={130}>
                  <TextInput
                    size="xs"
                    value={r.name}
                    onChange={(e) => set(r.key, { name: e.currentTarget.value })}
                    aria-label="Objective name"
                    error={field?.startsWith(`objectives.${r.name}`) ? true : undefined}
                  />
                </Table.Td>
                <Table.Td w={120}>
                  <Select
                    size="xs"
                    data={[
                      { value: "series", label: "From a series" },
                      { value: "expr", label: "Expression" },
                    ]}
                    value={r.kind}
                    onChange={(v) => v && set(r.key, { kind: v as Row["kind"] })}
                    allowDeselect={false}
                    aria-label={`${r.name} kind`}
                  />
                </Table.Td>
                <Table.Td>
                  {r.kind === "series" ? (
                    <Group gap={6} wrap="nowrap">
                      <Autocomplete
                        size="xs"
                        style={{ flex: 1 }}
                        data={series}
                        limit={200}
                        value={r.series}
                        onChange={(v) => set(r.key, { series: v })}
                        aria-label={`${r.name} series`}
                      />
                      <Select
                        size="xs"
                        w={140}
                        data={[
                          { value: "last", label: "last value" },
                          { value: "mean_last", label: "mean of last n" },
                          { value: "min", label: "minimum" },
                          { value: "max", label: "maximum" },
                        ]}
                        value={r.reduce}
                        onChange={(v) => v && set(r.key, { reduce: v as Reduce })}
                        allowDeselect={false}
                        aria-label={`${r.name} reduction`}
                      />
                      {r.reduce === "mean_last" && (
                        <TextInput
                          size="xs"
                          w={60}
                          value={r.n}
                          onChange={(e) => set(r.key, { n: e.currentTarget.value })}
                          aria-label={`${r.name} n`}
                        />
                      )}
                    </Group>
                  ) : (
                    <TextInput
                      size="xs"
                      value={r.expr}
                      onChange={(e) => set(r.key, { expr: e.currentTarget.value })}
                      placeholder="Cl / Cd"
                      aria-label={`${r.name} expression`}
                    />
                  )}
                </Table.Td>
                <Table.Td w={40}>
                  <ActionIcon
                    variant="subtle"
                    color="gray"
                    onClick={() => setRows((rs) => rs.filter((x) => x.key !== r.key))}
                    aria-label={`Remove objective ${r.name}`}
                  >
                    <IconTrash size={16} />
                  </ActionIcon>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
        <Button
          variant="subtle"
          size="xs"
          w="fit-content"
          leftSection={<IconPlus size={14} />}
          onClick={() =>
            setRows((rs) => [
              ...rs,
              {
                key: nextKey++,
                name: "",
                kind: "series",
                series: "",
                reduce: "last",
                n: "20",
                expr: "",
              },
            ])
          }
        >
          Add objective
        </Button>
        <Group gap="sm" align="flex-end">
          <Text size="sm">A completed run is trusted as converged when</Text>
          <TextInput
            size="xs"
            w={110}
            label="residuals below"
            value={residualsBelow}
            onChange={(e) => setResidualsBelow(e.currentTarget.value)}
            error={field === "trust.residuals_below" ? true : undefined}
          />
          <TextInput
            size="xs"
            w={110}
            label="objectives drift below"
            value={driftBelow}
            onChange={(e) => setDriftBelow(e.currentTarget.value)}
            error={field === "trust.drift_below" ? true : undefined}
          />
        </Group>
        {error && (
          <Alert
            color="red"
            variant="light"
            icon={<IconAlertTriangle size={16} />}
            role="alert"
            title="Not saved"
          >
            {errorMessage(error)}
          </Alert>
        )}
        <Group justify="flex-end">
          <Button variant="default" onClick={onClose}>
            Close
          </Button>
          <Button
            loading={save.isPending}
            data-testid="save-objectives"
            onClick={() =>
              save.mutate(
                {
                  id: study.id,
                  objectives: specOf(rows),
                  trust: {
                    ...rules,
                    residuals_below: Number(residualsBelow),
                    drift_below: Number(driftBelow),
                  },
                },
                { onSuccess: onClose },
              )
            }
          >
            Save and recompute
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}
