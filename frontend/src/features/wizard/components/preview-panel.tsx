import {
  Alert,
  Badge,
  Card,
  Group,
  Loader,
  Progress,
  Stack,
  Table,
  Text,
  Title,
} from "@mantine/core";
import { IconAlertTriangle, IconCircleCheck } from "@/components/icons";
import { ApiError, errorMessage } from "@/lib/api-client";
import { formatGb, formatInt, formatNumber, plural } from "@/lib/format";
import type { Preview } from "@/lib/types";
import { adaptiveOutline } from "../lib/adaptive";
import { impactSentence } from "../lib/impact";

export function PreviewPanel({
  preview,
  error,
  loading,
  localProblems,
  markedOn = [],
  waitingFor,
}: {
  preview: Preview | undefined;
  error: unknown;
  loading: boolean;
  /** problems marked on the form (those not shown until a save attempt are not counted) */
  localProblems: number;
  /** the steps those marked fields are on */
  markedOn?: string[];
  /** what the preview waits for when nothing is marked yet (e.g. "pick a template, …") */
  waitingFor?: string;
}) {
  const q = preview?.quota;
  return (
    <Card withBorder radius="md" padding="md" data-testid="preview-panel">
      <Group justify="space-between" mb="xs">
        <Text size="xs" tt="uppercase" fw={700} c="dimmed">
          Preview
        </Text>
        {loading && <Loader size={14} />}
      </Group>
      <Group align="baseline" gap={6}>
        <Title order={2} ff="monospace" data-testid="run-count">
          {preview ? formatInt(preview.run_count) : "—"}
        </Title>
        <Text c="dimmed">
          {preview?.run_count === 1 ? "run" : "runs"}
          {preview?.adaptive ? " first" : ""}
        </Text>
      </Group>
      {preview?.adaptive && (
        <Text size="sm" mt={4} data-testid="preview-adaptive">
          {adaptiveOutline(preview.adaptive)}
        </Text>
      )}
      {preview && preview.checked_runs < preview.run_count && (
        <Text size="xs" c="dimmed" data-testid="preview-checked">
          Values of the first {plural(preview.checked_runs, "run")} checked here; submitting checks
          every run.
        </Text>
      )}
      {localProblems > 0 ? (
        <Text size="sm" c="var(--mantine-color-orange-light-color)" mt="xs">
          Fix {plural(localProblems, "marked field")}
          {markedOn.length ? ` on ${markedOn.join(", ")}` : ""} to update the preview.
        </Text>
      ) : waitingFor ? (
        <Text size="sm" c="dimmed" mt="xs" data-testid="preview-waiting">
          The preview appears once you {waitingFor}.
        </Text>
      ) : error ? (
        <Alert
          color="red"
          variant="light"
          mt="sm"
          icon={<IconAlertTriangle size={16} />}
          p="xs"
          data-testid="preview-error"
        >
          <Text size="sm">{errorMessage(error)}</Text>
          {error instanceof ApiError && error.field && (
            <Text size="xs" c="dimmed" mt={2}>
              at {error.field}
            </Text>
          )}
        </Alert>
      ) : null}
      {q && (
        <Stack gap={8} mt="md">
          <Group gap={6} wrap="nowrap" align="flex-start">
            {q.fits ? (
              <IconCircleCheck
                size={18}
                color="var(--mantine-color-teal-6)"
                style={{ flexShrink: 0 }}
              />
            ) : (
              <IconAlertTriangle
                size={18}
                color="var(--mantine-color-red-6)"
                style={{ flexShrink: 0 }}
              />
            )}
            <Text size="sm" fw={500} data-testid="quota-impact">
              {preview ? impactSentence(preview.run_count, q) : ""}
            </Text>
          </Group>
          {q.problem && (
            <Text size="sm" c="var(--mantine-color-red-light-color)">
              {q.problem}
            </Text>
          )}
          <QuotaBar
            label="Cores"
            perRun={q.per_run.cores}
            concurrent={q.concurrent_runs}
            inUse={q.in_use.cores}
            limit={q.limits.cores}
          />
          <QuotaBar
            label="Memory"
            perRun={q.per_run.memory_gb}
            concurrent={q.concurrent_runs}
            inUse={q.in_use.memory_gb}
            limit={q.limits.memory_gb}
            format={formatGb}
          />
          {q.limits.storage_gb !== undefined && q.in_use.storage_gb !== undefined && (
            <StorageLine
              stored={q.in_use.storage_gb}
              limit={q.limits.storage_gb}
              full={Boolean(q.storage_full)}
            />
          )}
          {preview?.estimate && (
            <Text
              size="sm"
              data-testid="preview-estimate"
              c={preview.estimate.based_on ? undefined : "dimmed"}
            >
              Estimated cost: {preview.estimate.summary}.
            </Text>
          )}
          <Text size="xs" c="dimmed">
            Whole study: {plural(q.total.cores, "core")} and {formatGb(q.total.memory_gb)} in all,
            added up over its runs; each run holds its share only while it runs. A study may be
            larger than the quota: the runs that do not fit wait in the queue.
          </Text>
        </Stack>
      )}
    </Card>
  );
}

function QuotaBar({
  label,
  perRun,
  concurrent,
  inUse,
  limit,
  format = (v: number) => String(v),
}: {
  label: string;
  perRun: number;
  concurrent: number;
  inUse: number;
  limit: number;
  format?: (v: number) => string;
}) {
  const pct = (v: number) => (limit > 0 ? Math.min(100, (v / limit) * 100) : 0);
  const busy = pct(inUse);
  const mine = Math.min(100 - busy, pct(perRun * concurrent));
  return (
    <Stack gap={2}>
      <Group justify="space-between">
        <Text size="xs" fw={600}>
          {label}
        </Text>
        <Text size="xs" c="dimmed" ff="monospace">
          {format(perRun)}/run · {format(inUse)} in use · limit {format(limit)}
        </Text>
      </Group>
      <Progress.Root size="md" radius="sm">
        <Progress.Section value={busy} color="gray.5" aria-label={`${label} in use now`} />
        <Progress.Section value={mine} color="blue" aria-label={`${label} this study takes`} />
      </Progress.Root>
    </Stack>
  );
}

/** What the tenant stores (uploads, result archives, run directories) against its quota. */
function StorageLine({ stored, limit, full }: { stored: number; limit: number; full: boolean }) {
  return (
    <Stack gap={2} data-testid="preview-storage" data-full={full}>
      <Group justify="space-between">
        <Text size="xs" fw={600}>
          Storage
        </Text>
        <Text size="xs" c={full ? "var(--mantine-color-red-light-color)" : "dimmed"} ff="monospace">
          {formatGb(stored)} stored · limit {formatGb(limit)}
          {full ? " · full" : ""}
        </Text>
      </Group>
      <Progress.Root size="md" radius="sm">
        <Progress.Section
          value={limit > 0 ? Math.min(100, (stored / limit) * 100) : 100}
          color={full ? "red" : "gray.5"}
          aria-label="Storage in use now"
        />
      </Progress.Root>
    </Stack>
  );
}

/** The first runs the spec makes, with their values. */
export function PreviewRows({
  preview,
  derivedNames,
}: {
  preview: Preview;
  derivedNames: string[];
}) {
  const params = preview.parameters;
  const derived = derivedNames.filter((d) => preview.rows[0]?.context[d] !== undefined);
  if (!preview.rows.length) return null;
  return (
    <Stack gap={6}>
      <Group gap={6}>
        <Text size="sm" fw={600}>
          First runs
        </Text>
        <Badge size="xs" variant="light" radius="sm">
          {preview.rows.length} of {formatInt(preview.run_count)}
        </Badge>
      </Group>
      <Table.ScrollContainer minWidth={320}>
        <Table
          striped
          fz="xs"
          verticalSpacing={4}
          aria-label="First runs"
          data-testid="preview-rows"
        >
          <Table.Thead>
            <Table.Tr>
              <Table.Th>#</Table.Th>
              {params.map((p) => (
                <Table.Th key={p} ta="right" ff="monospace">
                  {p}
                </Table.Th>
              ))}
              {derived.map((d) => (
                <Table.Th key={d} ta="right" ff="monospace" c="dimmed">
                  {d}
                </Table.Th>
              ))}
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {preview.rows.map((r) => (
              <Table.Tr key={r.index}>
                <Table.Td ff="monospace">{r.index}</Table.Td>
                {params.map((p) => (
                  <Table.Td key={p} ta="right" ff="monospace">
                    {formatNumber(r.parameters[p])}
                  </Table.Td>
                ))}
                {derived.map((d) => (
                  <Table.Td key={d} ta="right" ff="monospace" c="dimmed">
                    {formatNumber(r.context[d])}
                  </Table.Td>
                ))}
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
    </Stack>
  );
}
