import { Alert, Group, Loader, SegmentedControl, Select, Stack, Text } from "@mantine/core";
import { useMemo, useState } from "react";
import { Plot } from "@/components/plot";
import { LoadingState } from "@/components/states";
import { errorMessage } from "@/lib/api-client";
import { useFieldData, useRunFields } from "../hooks/use-results";
import { fieldLayout, fieldTraces } from "../lib/field-traces";
import { pickField, pickRegion, planeCaption, REGION_LABELS } from "../lib/pick";
import { CpPlot } from "./cp-plot";

/** A completed run's final flow fields (choose the field and region) and its Cp plot. */
export function FlowFields({ runId, ended }: { runId: string; ended: boolean }) {
  const index = useRunFields(runId, { enabled: ended });
  const [wantedField, setField] = useState<string | null>(null);
  const [wantedRegion, setRegion] = useState<string | null>(null);
  const field = pickField(index.data, wantedField);
  const region = pickRegion(index.data, wantedRegion);
  const data = useFieldData(runId, index.data?.available ? field : null, region);
  const planeAxes = index.data?.plane?.axes;
  const axes = useMemo(() => planeAxes ?? ["x", "y"], [planeAxes]);
  const traces = useMemo(
    () => (data.data ? fieldTraces(data.data, { axes }) : []),
    [data.data, axes],
  );
  const grid = data.data?.region;
  const layout = useMemo(
    () => (grid ? fieldLayout(grid, { axes, revision: runId }) : undefined),
    [grid, axes, runId],
  );

  if (!ended)
    return (
      <Text size="sm" c="dimmed">
        The final fields appear here when the run has completed.
      </Text>
    );
  if (index.isPending) return <LoadingState h={120} />;
  if (index.isError)
    return <Alert color="red">Could not load the flow fields: {errorMessage(index.error)}</Alert>;
  const fields = index.data;
  if (!fields.available && fields.preparing)
    return (
      <Group gap="xs" data-testid="fields-preparing">
        <Loader size="xs" />
        <Text size="sm" c="dimmed">
          Preparing the flow fields from the run&apos;s final time…
        </Text>
      </Group>
    );
  if (!fields.available)
    return (
      <Stack gap={4} data-testid="fields-none">
        <Text size="sm" c="dimmed">
          This run has no flow fields. They are made from a completed run&apos;s final time (in
          ASCII format); runs that failed or were stopped have none.
        </Text>
        {fields.notes.map((note) => (
          <Text key={note} size="xs" c="dimmed">
            {note}
          </Text>
        ))}
      </Stack>
    );
  return (
    <Stack gap="sm" data-testid="flow-fields">
      <Group gap="sm" align="flex-end" wrap="wrap">
        <Select
          size="xs"
          label="Field"
          data={fields.fields.map((f) => ({ value: f.name, label: f.label }))}
          value={field}
          onChange={(v) => v && setField(v)}
          allowDeselect={false}
          w={140}
          data-testid="field-select"
        />
        {fields.regions.length > 1 && (
          <SegmentedControl
            size="xs"
            value={region ?? ""}
            onChange={setRegion}
            data={fields.regions.map((r) => ({
              value: r.name,
              label: REGION_LABELS[r.name] ?? r.name,
            }))}
            aria-label="Region"
          />
        )}
        <Text size="xs" c="dimmed" ml="auto" maw={420}>
          {planeCaption(fields)}
        </Text>
      </Group>
      {data.isError ? (
        <Alert color="red">{errorMessage(data.error)}</Alert>
      ) : (
        <Plot
          data={traces}
          layout={layout}
          height={420}
          aria-label={`${field ?? "field"} on the ${region ?? ""} region`}
          data-testid="field-plot"
        />
      )}
      {fields.cp ? (
        <>
          <Text fw={600} size="sm" mt="sm">
            Surface pressure coefficient ({fields.cp.patches.join(", ")})
          </Text>
          <CpPlot cp={fields.cp} />
        </>
      ) : null}
      {fields.notes.length > 0 && (
        <Text size="xs" c="dimmed" data-testid="fields-notes">
          {fields.notes.join(" · ")}
        </Text>
      )}
    </Stack>
  );
}
