import { Group, SegmentedControl, Select, SimpleGrid, Stack, Text } from "@mantine/core";
import { useMemo, useState } from "react";
import { Plot } from "@/components/plot";
import { useFieldsData, useRunsFields } from "../hooks/use-results";
import { fieldLayout, fieldTraces, sharedRange } from "../lib/field-traces";
import { common, REGION_LABELS } from "../lib/pick";
import { plural } from "@/lib/format";

export interface FieldRun {
  id: string;
  label: string;
}

/** The same field of several runs side by side, on one colour scale. */
export function FieldCompare({ runs }: { runs: FieldRun[] }) {
  const ids = runs.map((r) => r.id);
  const indexes = useRunsFields(ids);
  const withFields = runs.filter((_, i) => indexes[i]?.data?.available);
  const lists = indexes.filter((q) => q.data?.available);
  const fields = common(lists.map((q) => q.data!.fields.map((f) => f.name)));
  const regions = common(lists.map((q) => q.data!.regions.map((r) => r.name)));
  const [wantedField, setField] = useState<string | null>(null);
  const [wantedRegion, setRegion] = useState<string | null>(null);
  const field =
    wantedField && fields.includes(wantedField)
      ? wantedField
      : fields.includes("mag(U)")
        ? "mag(U)"
        : (fields[0] ?? null);
  const region =
    wantedRegion && regions.includes(wantedRegion)
      ? wantedRegion
      : regions.includes("body")
        ? "body"
        : (regions[0] ?? null);
  const shownIds = withFields.map((r) => r.id);
  const datas = useFieldsData(shownIds, field, region);
  const values = datas.map((d) => d.data);
  const range = useMemo(() => sharedRange(values), [values]);
  const labelOf = (f: string) => lists[0]?.data?.fields.find((x) => x.name === f)?.label ?? f;

  if (indexes.some((q) => q.isPending))
    return (
      <Text size="sm" c="dimmed">
        Loading the runs' fields…
      </Text>
    );
  if (!withFields.length || !field)
    return (
      <Text size="sm" c="dimmed" data-testid="field-compare-none">
        None of these runs has flow fields in common (they are written when a run completes).
      </Text>
    );
  const missing = runs.length - withFields.length;
  return (
    <Stack gap="sm" data-testid="field-compare">
      <Group gap="sm" align="flex-end">
        <Select
          size="xs"
          label="Field"
          data={fields.map((f) => ({ value: f, label: labelOf(f) }))}
          value={field}
          onChange={(v) => v && setField(v)}
          allowDeselect={false}
          w={140}
        />
        {regions.length > 1 && (
          <SegmentedControl
            size="xs"
            value={region ?? ""}
            onChange={setRegion}
            data={regions.map((r) => ({ value: r, label: REGION_LABELS[r] ?? r }))}
            aria-label="Region"
          />
        )}
        <Text size="xs" c="dimmed" ml="auto" data-testid="field-compare-range">
          {range
            ? `one colour scale: ${labelOf(field)} from ${Number(range[0].toPrecision(4))} to ${Number(range[1].toPrecision(4))}`
            : ""}
          {missing > 0 ? ` · ${plural(missing, "run")} without fields left out` : ""}
        </Text>
      </Group>
      <SimpleGrid cols={{ base: 1, md: Math.min(withFields.length, 3) }} spacing="sm">
        {withFields.map((run, i) => {
          const d = values[i];
          return (
            <Stack key={run.id} gap={2}>
              <Text size="xs" fw={600}>
                {run.label}
              </Text>
              <Plot
                data={d ? fieldTraces(d, { range, scaleBelow: true }) : []}
                layout={{
                  margin: { l: 40, r: 8, t: 8, b: 80 },
                  ...(d ? fieldLayout(d.region, { axes: ["", ""], revision: run.id }) : {}),
                }}
                height={300}
                aria-label={`${labelOf(field)} of ${run.label}`}
                data-testid="field-compare-plot"
              />
            </Stack>
          );
        })}
      </SimpleGrid>
    </Stack>
  );
}
