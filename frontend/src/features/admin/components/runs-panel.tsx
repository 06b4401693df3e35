import {
  Badge,
  Button,
  Group,
  Modal,
  MultiSelect,
  Select,
  Skeleton,
  Stack,
  Table,
  Text,
  Textarea,
} from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { useState, type FormEvent } from "react";
import { EmptyState, ErrorState } from "@/components/states";
import { formatInt, formatRelative } from "@/lib/format";
import type { OperationsFilter, OperationsRun } from "../api/admin";
import { fieldError } from "../api/field-error";
import { useOperationsRuns, useStopOperationsRun } from "../hooks/use-admin";
import { FormError } from "./form-parts";

const STATES = [
  { value: "running", label: "Running" },
  { value: "provisioning", label: "Provisioning" },
  { value: "admitted", label: "Admitted" },
  { value: "pending", label: "Queued" },
];
const STATE_COLOR: Record<string, string> = {
  running: "blue",
  provisioning: "cyan",
  admitted: "grape",
  pending: "gray",
};

function StopRunModal({ run, onClose }: { run: OperationsRun; onClose: () => void }) {
  const stop = useStopOperationsRun();
  const [reason, setReason] = useState("");
  const submit = (e: FormEvent) => {
    e.preventDefault();
    stop.mutate(
      { id: run.id, reason },
      {
        onSuccess: () => {
          notifications.show({
            message: `Run ${run.index} of ${run.study_name} stopped`,
            color: "teal",
          });
          onClose();
        },
      },
    );
  };
  return (
    <Modal opened onClose={onClose} title={`Stop run ${run.index} of ${run.study_name}`}>
      <form onSubmit={submit}>
        <Stack gap="sm">
          <Text size="sm">
            {run.tenant} · {run.owner || "no owner"} · {run.backend}. The run is cancelled as its
            owner's cancel would; they read your reason in the run's message.
          </Text>
          <Textarea
            label="Reason"
            required
            autosize
            minRows={2}
            maxLength={500}
            data-autofocus
            value={reason}
            onChange={(e) => setReason(e.currentTarget.value)}
            error={fieldError(stop.error, "reason")}
          />
          <FormError error={stop.error} fields={["reason"]} />
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Keep it running
            </Button>
            <Button type="submit" color="red" loading={stop.isPending} disabled={!reason.trim()}>
              Stop run
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

/**
 * Operations: every tenant's running and queued runs, filtered by tenant, backend and state;
 * an operator stops one with a reason its owner reads.
 */
export function RunsPanel({ tenants, backends }: { tenants: string[]; backends: string[] }) {
  const [filter, setFilter] = useState<OperationsFilter>({});
  const [stopping, setStopping] = useState<OperationsRun | null>(null);
  const runs = useOperationsRuns(filter);
  const set = (patch: OperationsFilter) => setFilter((f) => ({ ...f, ...patch }));

  return (
    <Stack gap="sm">
      <Group align="flex-end">
        <Select
          label="Tenant"
          placeholder="every tenant"
          clearable
          searchable
          data={tenants}
          value={filter.tenant ?? null}
          onChange={(v) => set({ tenant: v ?? undefined })}
        />
        <Select
          label="Backend"
          placeholder="every backend"
          clearable
          data={backends}
          value={filter.backend ?? null}
          onChange={(v) => set({ backend: v ?? undefined })}
        />
        <MultiSelect
          label="State"
          placeholder={filter.state?.length ? undefined : "running and queued"}
          clearable
          data={STATES}
          value={filter.state ?? []}
          onChange={(v) => set({ state: v })}
          miw={220}
        />
        {runs.data && (
          <Text size="sm" c="dimmed" data-testid="operations-count">
            {formatInt(runs.data.count)} run{runs.data.count === 1 ? "" : "s"}
            {runs.data.count > runs.data.results.length
              ? ` (the first ${runs.data.results.length} shown)`
              : ""}
          </Text>
        )}
      </Group>
      {runs.isError ? (
        <ErrorState error={runs.error} onRetry={() => runs.refetch()} />
      ) : !runs.data ? (
        <Skeleton h={200} />
      ) : runs.data.results.length === 0 ? (
        <EmptyState title="No runs">
          No run is running or queued that matches these filters.
        </EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={900}>
          <Table striped highlightOnHover data-testid="operations-runs">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Run</Table.Th>
                <Table.Th>Tenant</Table.Th>
                <Table.Th>Owner</Table.Th>
                <Table.Th>Backend</Table.Th>
                <Table.Th>State</Table.Th>
                <Table.Th ta="right">Iterations</Table.Th>
                <Table.Th>Since</Table.Th>
                <Table.Th>Heartbeat</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {runs.data.results.map((r) => (
                <Table.Tr key={r.id} data-testid="operations-run">
                  <Table.Td>
                    <Text size="sm">
                      {r.study_name}{" "}
                      <Text span c="dimmed" size="sm">
                        #{r.index}
                      </Text>
                    </Text>
                  </Table.Td>
                  <Table.Td>{r.tenant}</Table.Td>
                  <Table.Td>{r.owner}</Table.Td>
                  <Table.Td>{r.backend}</Table.Td>
                  <Table.Td>
                    <Badge color={STATE_COLOR[r.state ?? ""] ?? "gray"} variant="light" radius="sm">
                      {r.state === "pending" ? "queued" : r.state}
                    </Badge>
                    {r.phase && (
                      <Text size="xs" c="dimmed">
                        {r.phase}
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td ta="right" ff="monospace">
                    {formatInt(r.iterations)}
                  </Table.Td>
                  <Table.Td>
                    <Text size="xs">{formatRelative(r.started_at ?? r.queued_at)}</Text>
                  </Table.Td>
                  <Table.Td>
                    <Text size="xs">{formatRelative(r.heartbeat_at)}</Text>
                  </Table.Td>
                  <Table.Td ta="right">
                    <Button
                      size="compact-xs"
                      color="red"
                      variant="light"
                      aria-label={`Stop run ${r.index} of ${r.study_name} (${r.tenant})`}
                      onClick={() => setStopping(r)}
                    >
                      Stop
                    </Button>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      {stopping && <StopRunModal run={stopping} onClose={() => setStopping(null)} />}
    </Stack>
  );
}
