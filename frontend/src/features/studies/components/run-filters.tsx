import {
  Badge,
  Button,
  Chip,
  CloseButton,
  Group,
  NumberInput,
  Select,
  Stack,
  Text,
} from "@mantine/core";
import { useState } from "react";
import { RUN, RUN_STATES } from "@/lib/states";
import { formatInt, formatNumber } from "@/lib/format";
import type { RunState, Trust } from "@/lib/types";
import type { RangeFilter, RunQuery } from "../lib/run-query";

const TRUSTS: { value: Exclude<Trust, "">; label: string }[] = [
  { value: "converged", label: "Converged" },
  { value: "iteration_limit", label: "Iteration limit" },
  { value: "not_converged", label: "Not converged" },
  { value: "diverged", label: "Diverged" },
  { value: "unsteady", label: "Unsteady" },
];

function rangeLabel(r: RangeFilter): string {
  const name = r.column.replace(/^(param|objective)\./, "");
  if (r.low !== null && r.high !== null)
    return `${formatNumber(r.low)} ≤ ${name} ≤ ${formatNumber(r.high)}`;
  return r.low !== null ? `${name} ≥ ${formatNumber(r.low)}` : `${name} ≤ ${formatNumber(r.high)}`;
}

function asNumber(v: string | number): number | null {
  if (v === "" || v === "-") return null;
  const n = typeof v === "number" ? v : Number(v);
  return Number.isFinite(n) ? n : null;
}

/** The runs table's filters: state and trust chips, ranges, and across studies the study and backend. */
export function RunFilters({
  query,
  onQueryChange,
  parameters,
  objectives,
  counts,
  studies,
  backends,
}: {
  query: RunQuery;
  onQueryChange: (patch: Partial<RunQuery>) => void;
  parameters: string[];
  objectives: string[];
  counts?: Record<string, number> | undefined;
  studies?: { value: string; label: string }[] | undefined;
  backends?: string[] | undefined;
}) {
  const columns = [
    ...parameters.map((p) => ({ value: `param.${p}`, label: p, group: "Parameters" })),
    ...objectives.map((o) => ({ value: `objective.${o}`, label: o, group: "Objectives" })),
  ];
  const [column, setColumn] = useState<string | null>(null);
  const [low, setLow] = useState<string | number>("");
  const [high, setHigh] = useState<string | number>("");
  const chosen = column ?? columns[0]?.value ?? null;
  const lo = asNumber(low);
  const hi = asNumber(high);
  const invalid = lo !== null && hi !== null && lo > hi;

  const addRange = () => {
    if (!chosen || (lo === null && hi === null) || invalid) return;
    const ranges = query.ranges.filter((r) => r.column !== chosen);
    onQueryChange({ ranges: [...ranges, { column: chosen, low: lo, high: hi }] });
    setLow("");
    setHigh("");
  };

  const grouped = (["Parameters", "Objectives"] as const)
    .map((g) => ({
      group: g,
      items: columns.filter((c) => c.group === g).map(({ value, label }) => ({ value, label })),
    }))
    .filter((g) => g.items.length > 0);

  return (
    <Stack gap="xs" mb="sm">
      <Group gap="xs" wrap="wrap" aria-label="Filter runs by state" role="group">
        <Chip.Group
          multiple
          value={query.state}
          onChange={(v) => onQueryChange({ state: v as RunState[] })}
        >
          {RUN_STATES.map((s) => (
            <Chip key={s} value={s} size="xs" color={RUN[s].color} data-testid={`state-chip-${s}`}>
              {RUN[s].label}
              {counts ? ` ${formatInt(counts[s] ?? 0)}` : ""}
            </Chip>
          ))}
        </Chip.Group>
      </Group>
      <Group gap="md" wrap="wrap" align="flex-end">
        <Group gap="xs" wrap="wrap" aria-label="Filter runs by trust" role="group">
          <Text size="xs" c="dimmed">
            Trust
          </Text>
          <Chip.Group
            multiple
            value={query.trust}
            onChange={(v) => onQueryChange({ trust: v as RunQuery["trust"] })}
          >
            {TRUSTS.map((t) => (
              <Chip key={t.value} value={t.value} size="xs" variant="outline">
                {t.label}
              </Chip>
            ))}
          </Chip.Group>
        </Group>
        {columns.length > 0 && (
          <Group gap={6} wrap="nowrap" align="flex-end">
            <Select
              size="xs"
              label="Range of"
              data={grouped}
              value={chosen}
              onChange={setColumn}
              allowDeselect={false}
              w={130}
            />
            <NumberInput
              size="xs"
              label="min"
              value={low}
              onChange={setLow}
              w={90}
              hideControls
              error={invalid || undefined}
              onKeyDown={(e) => e.key === "Enter" && addRange()}
            />
            <NumberInput
              size="xs"
              label="max"
              value={high}
              onChange={setHigh}
              w={90}
              hideControls
              error={invalid || undefined}
              onKeyDown={(e) => e.key === "Enter" && addRange()}
            />
            <Button
              size="xs"
              variant="light"
              onClick={addRange}
              disabled={(lo === null && hi === null) || invalid}
            >
              Filter
            </Button>
          </Group>
        )}
        {studies && (
          <Select
            size="xs"
            label="Study"
            placeholder="all studies"
            data={studies}
            value={query.study}
            onChange={(v) => onQueryChange({ study: v, ranges: [] })}
            searchable
            clearable
            w={200}
          />
        )}
        {backends && (
          <Select
            size="xs"
            label="Backend"
            placeholder="all backends"
            data={backends}
            value={query.backend}
            onChange={(v) => onQueryChange({ backend: v })}
            clearable
            w={150}
          />
        )}
      </Group>
      {query.ranges.length > 0 && (
        <Group gap={6} data-testid="range-filters">
          {query.ranges.map((r) => (
            <Badge
              key={r.column}
              variant="light"
              tt="none"
              rightSection={
                <CloseButton
                  size="xs"
                  variant="transparent"
                  aria-label={`Remove the filter ${rangeLabel(r)}`}
                  onClick={() =>
                    onQueryChange({ ranges: query.ranges.filter((x) => x.column !== r.column) })
                  }
                />
              }
            >
              {rangeLabel(r)}
            </Badge>
          ))}
          <Button size="compact-xs" variant="subtle" onClick={() => onQueryChange({ ranges: [] })}>
            Clear ranges
          </Button>
        </Group>
      )}
    </Stack>
  );
}
