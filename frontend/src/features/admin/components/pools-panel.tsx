import { Badge, Button, Group, NumberInput, Stack, Table, Text, Title } from "@mantine/core";
import { useState, type FormEvent } from "react";
import { EmptyState } from "@/components/states";
import type { Pool, PoolWorker } from "../api/admin";
import { fieldError } from "../api/field-error";
import { useUpdatePool } from "../hooks/use-admin";
import { DeletePoolButton } from "./pool-forms";
import { plural } from "@/lib/format";

const STATE_COLOR: Record<string, string> = {
  booting: "yellow",
  idle: "gray",
  busy: "green",
  draining: "orange",
  deleted: "gray",
  lost: "red",
  failed: "red",
};

function duration(seconds: number): string {
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

/** A pool's min, max and idle timeout, edited in place; the API's 400 names the field. */
function PoolBounds({ pool }: { pool: Pool }) {
  const update = useUpdatePool();
  const [min, setMin] = useState<number | string>(pool.min_workers ?? 0);
  const [max, setMax] = useState<number | string>(pool.max_workers ?? 1);
  const [idle, setIdle] = useState<number | string>(pool.idle_timeout ?? 300);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    update.mutate({
      name: pool.name,
      body: { min_workers: Number(min), max_workers: Number(max), idle_timeout: Number(idle) },
    });
  };
  return (
    <form onSubmit={submit} aria-label={`Bounds of ${pool.name}`}>
      <Group align="flex-end" gap="xs">
        <NumberInput
          label="Min"
          w={90}
          min={0}
          value={min}
          onChange={setMin}
          error={fieldError(update.error, "min_workers")}
        />
        <NumberInput
          label="Max"
          w={90}
          min={0}
          value={max}
          onChange={setMax}
          error={fieldError(update.error, "max_workers")}
        />
        <NumberInput
          label="Idle timeout (s)"
          w={140}
          min={0}
          value={idle}
          onChange={setIdle}
          error={fieldError(update.error, "idle_timeout")}
        />
        <Button type="submit" size="sm" loading={update.isPending} disabled={pool.draining}>
          Save
        </Button>
      </Group>
    </form>
  );
}

function WorkersTable({ workers }: { workers: PoolWorker[] }) {
  if (!workers.length)
    return <Text size="sm">No workers (min 0: the pool is empty until runs wait).</Text>;
  return (
    <Table verticalSpacing={4} aria-label="Workers">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Worker</Table.Th>
          <Table.Th>State</Table.Th>
          <Table.Th>Runs</Table.Th>
          <Table.Th>Image</Table.Th>
          <Table.Th>Uptime</Table.Th>
          <Table.Th>Utilisation</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {workers.map((w) => (
          <Table.Tr key={w.id}>
            <Table.Td>
              <Text size="sm" ff="monospace">
                {w.server_name || w.id.slice(0, 8)}
              </Text>
              {w.end_reason && (
                <Text size="xs" c="dimmed">
                  {w.end_reason}
                </Text>
              )}
            </Table.Td>
            <Table.Td>
              <Badge color={STATE_COLOR[w.state ?? "idle"]} variant="light" radius="sm">
                {w.state}
              </Badge>
            </Table.Td>
            <Table.Td>
              <Text size="xs" ff="monospace">
                {w.runs.map((r) => r.slice(0, 8)).join(", ") || "—"} ({w.runs_done ?? 0} done)
              </Text>
            </Table.Td>
            <Table.Td>
              <Text size="xs" ff="monospace">
                {(w.image_ref ?? "").slice(0, 12)}
              </Text>
            </Table.Td>
            <Table.Td>{duration(w.uptime_s)}</Table.Td>
            <Table.Td>{Math.round(w.utilisation * 100)} %</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

/** Warm pools: each pool's shape and bounds, its workers and its last scaling decisions. */
export function PoolsPanel({ pools }: { pools: Pool[] }) {
  if (!pools.length)
    return (
      <EmptyState title="No warm pools">
        A pool keeps booted workers of one shape for an OpenStack backend: create one with New pool
        (docs/pools.md).
      </EmptyState>
    );
  return (
    <Stack gap="xl" data-testid="admin-pools">
      {pools.map((p) => (
        <Stack key={p.name} gap="xs">
          <Group justify="space-between">
            <Group gap={6}>
              <Title order={4}>{p.name}</Title>
              <Badge variant="outline" radius="sm">
                {p.backend}
              </Badge>
              {p.draining && (
                <Badge color="orange" title="deleted once its last worker is gone">
                  draining
                </Badge>
              )}
              {(p.boot_failures ?? 0) > 0 && (
                <Badge color="red">{plural(p.boot_failures ?? 0, "failed boot")} in a row</Badge>
              )}
            </Group>
            <Group gap="xs">
              <Text size="xs" c="dimmed">
                {p.flavor}: {plural(p.cores, "core")}, {p.memory_gb} GB; boot timeout{" "}
                {p.boot_timeout} s
              </Text>
              <DeletePoolButton pool={p} />
            </Group>
          </Group>
          <PoolBounds pool={p} />
          <WorkersTable workers={p.workers} />
          <Title order={6}>Last scaling decisions</Title>
          {p.decisions.length ? (
            <Table verticalSpacing={2} aria-label="Scaling decisions">
              <Table.Tbody>
                {p.decisions.map((d, i) => (
                  <Table.Tr key={`${d.at}-${i}`}>
                    <Table.Td>
                      <Text size="xs">{new Date(d.at).toLocaleTimeString()}</Text>
                    </Table.Td>
                    <Table.Td>
                      <Badge size="xs" variant="light">
                        {d.action}
                        {d.count ? ` ${d.count > 0 ? "+" : ""}${d.count}` : ""}
                      </Badge>
                    </Table.Td>
                    <Table.Td>
                      <Text size="xs">{d.reason}</Text>
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          ) : (
            <Text size="xs" c="dimmed">
              none yet
            </Text>
          )}
        </Stack>
      ))}
    </Stack>
  );
}
