import { Card, Grid, SimpleGrid, Stack, Text, Title } from "@mantine/core";
import { useMemo } from "react";
import { useSearchParams } from "react-router";
import { PageHeader } from "@/components/page-header";
import { ErrorState, LoadingState } from "@/components/states";
import {
  COMPARE_MAX,
  COMPARE_MIN,
  CompareTable,
  FieldCompare,
  runName,
  useRunsByIds,
} from "@/features/results";
import { ForcesPlot, ResidualOverlay } from "@/features/telemetry";
import { isActiveRun, type Run } from "@/lib/types";

/** /compare?runs=a,b,…: two to six runs' residuals, forces, fields and values together. */
export function ComparePage() {
  const [params] = useSearchParams();
  const ids = useMemo(
    () => [...new Set(params.get("runs")?.split(",").filter(Boolean) ?? [])],
    [params],
  );
  const queries = useRunsByIds(ids.slice(0, COMPARE_MAX));
  const runs = queries.map((q) => q.data).filter((r): r is Run => !!r);
  const label = (r: Run) =>
    `${runName(r, runs)}: ${Object.entries(r.parameters)
      .map(([k, v]) => `${k}=${v}`)
      .join(" ")}`;
  const oneStudy = runs[0] && runs.every((r) => r.study === runs[0]!.study) ? runs[0] : null;
  const crumbs = [
    { label: "Studies", to: "/studies" },
    ...(oneStudy
      ? [{ label: oneStudy.study_name ?? "Study", to: `/studies/${oneStudy.study}` }]
      : []),
    { label: "Compare" },
  ];

  if (ids.length < COMPARE_MIN || ids.length > COMPARE_MAX)
    return (
      <>
        <PageHeader title="Compare runs" crumbs={crumbs} />
        <Text size="sm" c="dimmed" data-testid="compare-usage">
          Pick {COMPARE_MIN} to {COMPARE_MAX} runs to compare: tick them in a study's runs table and
          choose “Compare selected” ({ids.length} given).
        </Text>
      </>
    );
  const failed = queries.find((q) => q.isError);
  if (failed) return <ErrorState error={failed.error} onRetry={() => failed.refetch()} />;
  if (runs.length < ids.length) return <LoadingState />;
  return (
    <>
      <PageHeader title={`Compare ${runs.length} runs`} crumbs={crumbs} />
      <Stack gap="lg">
        <Card padding="md">
          <Title order={3} mb="sm">
            Parameters and objectives
          </Title>
          <CompareTable runs={runs} />
        </Card>
        <Grid gutter="lg">
          <Grid.Col span={{ base: 12, xl: 6 }}>
            <Card padding="md" h="100%">
              <Title order={3} mb="xs">
                Residuals
              </Title>
              <ResidualOverlay
                runs={runs.map((r) => ({
                  id: r.id,
                  label: label(r),
                  active: isActiveRun(r.state),
                }))}
              />
            </Card>
          </Grid.Col>
          <Grid.Col span={{ base: 12, xl: 6 }}>
            <Card padding="md" h="100%">
              <Title order={3} mb="xs">
                Forces
              </Title>
              <SimpleGrid cols={{ base: 1, md: 2 }} spacing="sm">
                {runs.map((r) => (
                  <Stack key={r.id} gap={2}>
                    <Text size="xs" fw={600}>
                      {label(r)}
                    </Text>
                    <ForcesPlot runId={r.id} active={isActiveRun(r.state)} />
                  </Stack>
                ))}
              </SimpleGrid>
            </Card>
          </Grid.Col>
        </Grid>
        <Card padding="md">
          <Title order={3} mb="sm">
            Flow fields
          </Title>
          <FieldCompare runs={runs.map((r) => ({ id: r.id, label: label(r) }))} />
        </Card>
      </Stack>
    </>
  );
}
