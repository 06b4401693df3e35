import { Badge, Group, Progress, Stack, Table, Text, Tooltip } from "@mantine/core";
import { EmptyState } from "@/components/states";
import { formatBytes, formatDateTime, formatGb } from "@/lib/format";
import type { AdminBackend, AdminOverview, AdminTenant } from "../api/admin";
import { BackendActions } from "./backend-forms";
import { ImageActions } from "./image-forms";
import { TenantActions, TenantStatus } from "./tenant-forms";

function UsageCell({
  used,
  queued,
  limit,
  format = String,
}: {
  used: number;
  queued: number;
  limit: number;
  format?: (v: number) => string;
}) {
  const pct = limit ? Math.min(100, (used / limit) * 100) : 0;
  return (
    <Stack gap={2} miw={120}>
      <Text size="xs" ff="monospace">
        {format(used)} / {format(limit)}
        {queued ? (
          <Text span c="dimmed" size="xs">
            {" "}
            +{format(queued)} queued
          </Text>
        ) : null}
      </Text>
      <Progress
        size="sm"
        value={pct}
        color={pct >= 100 ? "red" : pct >= 80 ? "orange" : "blue"}
        aria-label={`${format(used)} of ${format(limit)}`}
      />
    </Stack>
  );
}

type Amounts = { cores: number; memory_gb: number };

/** Cores and memory in use (and asked for by queued runs) against a limit: a cell each. */
function CoresAndMemory({
  used,
  queued,
  limit,
}: {
  used: Amounts;
  queued: Amounts;
  limit: Amounts;
}) {
  return (
    <>
      <Table.Td>
        <UsageCell used={used.cores} queued={queued.cores} limit={limit.cores} />
      </Table.Td>
      <Table.Td>
        <UsageCell
          used={used.memory_gb}
          queued={queued.memory_gb}
          limit={limit.memory_gb}
          format={formatGb}
        />
      </Table.Td>
    </>
  );
}

/** A row's name in bold with a small outlined badge beside it (a kind, a version). */
function NameWithBadge({ name, badge }: { name: string; badge: string }) {
  return (
    <Group gap={6}>
      <Text fw={600} size="sm">
        {name}
      </Text>
      <Badge size="xs" variant="outline" radius="sm">
        {badge}
      </Badge>
    </Group>
  );
}

export function TenantsTable({ tenants }: { tenants: AdminTenant[] }) {
  if (!tenants.length)
    return <EmptyState title="No tenants yet">Create one with New tenant.</EmptyState>;
  return (
    <Table.ScrollContainer minWidth={960}>
      <Table verticalSpacing="sm" highlightOnHover aria-label="Tenants" data-testid="admin-tenants">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Tenant</Table.Th>
            <Table.Th ta="right">Members</Table.Th>
            <Table.Th ta="right">Studies</Table.Th>
            <Table.Th>Cores</Table.Th>
            <Table.Th>Memory</Table.Th>
            <Table.Th>Concurrent runs</Table.Th>
            <Table.Th>Since</Table.Th>
            <Table.Th />
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {tenants.map((t) => (
            <Table.Tr key={t.name} data-testid={`tenant-${t.name}`}>
              <Table.Td>
                <Group gap={6}>
                  <Text fw={600} size="sm">
                    {t.display_name}
                  </Text>
                  <TenantStatus tenant={t} />
                </Group>
                <Text size="xs" c="dimmed" ff="monospace">
                  {t.name}
                </Text>
              </Table.Td>
              <Table.Td ta="right" ff="monospace">
                {t.members}
              </Table.Td>
              <Table.Td ta="right" ff="monospace">
                {t.studies}
              </Table.Td>
              {t.limits ? (
                <>
                  <CoresAndMemory used={t.usage} queued={t.queued} limit={t.limits} />
                  <Table.Td>
                    <UsageCell used={t.usage.runs} queued={t.queued.runs} limit={t.limits.runs} />
                  </Table.Td>
                </>
              ) : (
                <Table.Td colSpan={3}>
                  <Text size="sm" c="dimmed">
                    no quota set
                  </Text>
                </Table.Td>
              )}
              <Table.Td>
                <Text size="xs">{formatDateTime(t.created_at)}</Text>
              </Table.Td>
              <Table.Td>
                <TenantActions tenant={t} />
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

const HEALTH_COLOR = { ok: "teal", degraded: "orange", disabled: "gray" } as const;

export function BackendsTable({ backends }: { backends: AdminBackend[] }) {
  if (!backends.length)
    return <EmptyState title="No compute backends">Add one with New backend.</EmptyState>;
  return (
    <Table.ScrollContainer minWidth={760}>
      <Table verticalSpacing="sm" aria-label="Backends" data-testid="admin-backends">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Backend</Table.Th>
            <Table.Th>Health</Table.Th>
            <Table.Th>Cores</Table.Th>
            <Table.Th>Memory</Table.Th>
            <Table.Th ta="right">Runs</Table.Th>
            <Table.Th>Tenants</Table.Th>
            <Table.Th />
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {backends.map((b) => (
            <Table.Tr key={b.name}>
              <Table.Td>
                <NameWithBadge name={b.name} badge={b.kind} />
                <Text size="xs" c="dimmed">
                  up to {b.capacity.nodes} node{b.capacity.nodes === 1 ? "" : "s"} per run
                </Text>
              </Table.Td>
              <Table.Td>
                <Tooltip label={b.health.detail} withArrow multiline w={240}>
                  <Badge color={HEALTH_COLOR[b.health.status]} variant="light" radius="sm">
                    {b.health.status}
                  </Badge>
                </Tooltip>
                {b.health.stalled > 0 && (
                  <Text size="xs" c="orange" data-testid="backend-stalled">
                    {b.health.stalled} stalled in the last hour
                  </Text>
                )}
              </Table.Td>
              <CoresAndMemory used={b.usage} queued={b.queued} limit={b.capacity} />
              <Table.Td ta="right" ff="monospace">
                {b.usage.runs}
                <Text span size="xs" c="dimmed">
                  {b.queued.runs ? ` +${b.queued.runs}` : ""}
                </Text>
              </Table.Td>
              <Table.Td>
                <Text size="xs">{b.tenants.length ? b.tenants.join(", ") : "every tenant"}</Text>
              </Table.Td>
              <Table.Td>
                <BackendActions backend={b} />
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

export function PackagesTable({ overview }: { overview: AdminOverview }) {
  return (
    <Table.ScrollContainer minWidth={640}>
      <Table verticalSpacing="xs" aria-label="Packages" data-testid="admin-packages">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Package</Table.Th>
            <Table.Th>Provides</Table.Th>
            <Table.Th>Depends on</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {overview.packages.map((p) => (
            <Table.Tr key={p.name}>
              <Table.Td>
                <NameWithBadge name={p.name} badge={p.version} />
                <Text size="xs" c="dimmed" lineClamp={2}>
                  {p.description}
                </Text>
              </Table.Td>
              <Table.Td>
                <Group gap={4}>
                  {p.solvers.length ? (
                    p.solvers.map((s) => (
                      <Badge key={s} size="xs" variant="light" radius="sm">
                        {s}
                      </Badge>
                    ))
                  ) : (
                    <Text size="xs" c="dimmed">
                      —
                    </Text>
                  )}
                </Group>
              </Table.Td>
              <Table.Td>
                <Text size="xs" ff="monospace">
                  {p.depends.join(", ") || "—"}
                </Text>
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

export function ImagesTable({ overview }: { overview: AdminOverview }) {
  if (!overview.images.length)
    return (
      <EmptyState title="No images built yet">
        Images are composed from packages when a container or OpenStack backend first needs them.
      </EmptyState>
    );
  return (
    <Table.ScrollContainer minWidth={640}>
      <Table verticalSpacing="xs" aria-label="Images">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Image</Table.Th>
            <Table.Th>Status</Table.Th>
            <Table.Th>Solvers</Table.Th>
            <Table.Th ta="right">Size</Table.Th>
            <Table.Th>Built</Table.Th>
            <Table.Th />
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {overview.images.map((i) => (
            <Table.Tr key={i.id}>
              <Table.Td>
                <Text fw={600} size="sm">
                  {i.name}
                </Text>
                <Text size="xs" c="dimmed" ff="monospace">
                  {i.kind} · {i.digest.slice(0, 16)}
                </Text>
              </Table.Td>
              <Table.Td>
                <Tooltip label={i.error || i.status} disabled={!i.error} withArrow>
                  <Badge
                    size="sm"
                    variant="light"
                    radius="sm"
                    color={i.status === "ready" ? "teal" : i.status === "failed" ? "red" : "gray"}
                  >
                    {i.status}
                  </Badge>
                </Tooltip>
              </Table.Td>
              <Table.Td>
                <Text size="xs">{i.solvers.join(", ") || "—"}</Text>
              </Table.Td>
              <Table.Td ta="right" ff="monospace">
                {formatBytes(i.size_bytes)}
              </Table.Td>
              <Table.Td>
                <Text size="xs">{formatDateTime(i.built_at)}</Text>
              </Table.Td>
              <Table.Td>
                <ImageActions image={i} />
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
