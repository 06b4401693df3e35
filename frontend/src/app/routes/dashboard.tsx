import {
  Anchor,
  Button,
  Card,
  Grid,
  Group,
  Skeleton,
  Stack,
  Table,
  Text,
  Title,
} from "@mantine/core";
import { IconPlus } from "@/components/icons";
import { useMemo } from "react";
import { Link, useNavigate } from "react-router";
import { PageHeader } from "@/components/page-header";
import { RunStateBadge } from "@/components/state-badge";
import { EmptyState, ErrorState } from "@/components/states";
import { TemplateCards } from "@/features/catalog";
import { QuotaGauges } from "@/features/quotas";
import { StudiesTable, useActiveRuns, useStudies } from "@/features/studies";
import { formatNumber, formatRelative } from "@/lib/format";
import { ACTIVE_RUN_STATES } from "@/lib/types";

const WAIT: Record<string, string> = {
  queued: "waiting for the scheduler",
  quota: "quota in use",
  backend_capacity: "backend full",
  cloud_limit: "cloud project limit",
  retry: "waiting to retry",
  image: "image building",
  pool_worker: "waiting for a pool worker",
  storage: "storage quota full",
  core_hour_budget: "monthly core-hour budget used up",
};

export function DashboardPage() {
  const navigate = useNavigate();
  const recent = useStudies({ pageSize: 8 });
  const active = useActiveRuns();
  const names = useMemo(
    () => new Map((recent.data?.results ?? []).map((s) => [s.id, s.name])),
    [recent.data],
  );

  return (
    <>
      <PageHeader
        title="Dashboard"
        subtitle="Your tenant's quota, what runs now, and your latest studies."
        actions={
          <Button component={Link} to="/studies/new" leftSection={<IconPlus size={16} />}>
            New study
          </Button>
        }
      />
      <Stack gap="lg">
        <QuotaGauges />
        <Grid gutter="lg">
          <Grid.Col span={{ base: 12, lg: 7 }}>
            <Card padding="md" h="100%">
              <Group justify="space-between" mb="sm">
                <Title order={3}>Recent studies</Title>
                <Anchor component={Link} to="/studies" size="sm">
                  All studies
                </Anchor>
              </Group>
              {recent.isError ? (
                <ErrorState error={recent.error} onRetry={() => recent.refetch()} />
              ) : !recent.data ? (
                <Stack gap="xs">
                  {[0, 1, 2, 3].map((i) => (
                    <Skeleton key={i} h={48} />
                  ))}
                </Stack>
              ) : recent.data.results.length === 0 ? (
                <EmptyState
                  title="No studies yet"
                  action={
                    <Button component={Link} to="/studies/new" size="xs" mt="xs">
                      Create your first study
                    </Button>
                  }
                >
                  A study runs one case over many parameter values: pick a template below to start.
                </EmptyState>
              ) : (
                <StudiesTable studies={recent.data.results} compact />
              )}
            </Card>
          </Grid.Col>
          <Grid.Col span={{ base: 12, lg: 5 }}>
            <Card padding="md" h="100%">
              <Group justify="space-between" mb="sm">
                <Title order={3}>Running and queued</Title>
                <Group gap="sm">
                  {active.data && (
                    <Text size="xs" c="dimmed">
                      {active.data.count} active
                    </Text>
                  )}
                  <Anchor
                    component={Link}
                    to={`/runs?state=${ACTIVE_RUN_STATES.join(",")}`}
                    size="sm"
                    data-testid="all-runs-link"
                  >
                    All runs →
                  </Anchor>
                </Group>
              </Group>
              {active.isError ? (
                <ErrorState error={active.error} onRetry={() => active.refetch()} />
              ) : !active.data ? (
                <Stack gap="xs">
                  {[0, 1, 2].map((i) => (
                    <Skeleton key={i} h={32} />
                  ))}
                </Stack>
              ) : active.data.results.length === 0 ? (
                <Text c="dimmed" size="sm" py="lg" ta="center">
                  Nothing is running or queued.
                </Text>
              ) : (
                <Table.ScrollContainer minWidth={380}>
                  <Table
                    verticalSpacing={6}
                    highlightOnHover
                    aria-label="Active runs"
                    data-testid="active-runs"
                  >
                    <Table.Tbody>
                      {active.data.results.slice(0, 12).map((r) => (
                        <Table.Tr
                          key={r.id}
                          style={{ cursor: "pointer" }}
                          onClick={() => navigate(`/runs/${r.id}`)}
                        >
                          <Table.Td>
                            <Anchor component={Link} to={`/runs/${r.id}`} size="sm" fw={600}>
                              Run {r.index}
                            </Anchor>
                            <Text size="xs" c="dimmed" lineClamp={1}>
                              {r.study_name || names.get(r.study) || "study"} ·{" "}
                              {Object.entries(r.parameters as Record<string, unknown>)
                                .map(([k, v]) => `${k}=${formatNumber(v)}`)
                                .join(", ")}
                            </Text>
                          </Table.Td>
                          <Table.Td w={150}>
                            <RunStateBadge state={r.state} size="xs" />
                            <Text size="xs" c="dimmed">
                              {r.state === "pending"
                                ? `${r.queue_position ? `#${r.queue_position} · ` : ""}${WAIT[r.wait_reason ?? ""] ?? "queued"}`
                                : r.started_at
                                  ? `started ${formatRelative(r.started_at)}`
                                  : r.phase || ""}
                            </Text>
                          </Table.Td>
                        </Table.Tr>
                      ))}
                    </Table.Tbody>
                  </Table>
                </Table.ScrollContainer>
              )}
            </Card>
          </Grid.Col>
        </Grid>
        <Card padding="md">
          <Title order={3} mb="sm">
            Start from a template
          </Title>
          <TemplateCards
            compact
            onSelect={(t) => navigate(`/studies/new?template=${encodeURIComponent(t.name)}`)}
          />
        </Card>
      </Stack>
    </>
  );
}
