import {
  Alert,
  Anchor,
  Button,
  Card,
  Grid,
  Group,
  SimpleGrid,
  Skeleton,
  Stack,
  Title,
} from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { notifications } from "@mantine/notifications";
import { IconDownload, IconPlayerStop } from "@/components/icons";
import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef } from "react";
import { Link, useParams } from "react-router";
import { ConfirmModal } from "@/components/confirm-modal";
import { Fact } from "@/components/fact";
import { PageHeader } from "@/components/page-header";
import { RunStateBadge, TrustBadge } from "@/components/state-badge";
import { ErrorState } from "@/components/states";
import { ReusedBadge } from "@/components/reused-badge";
import {
  ContinueRunButton,
  LogTail,
  ProvenancePanel,
  RerunBlock,
  ResumedFromNote,
  RunObjectives,
  useCancelRun,
  useRun,
  WaitReason,
} from "@/features/runs";
import { FlowFields } from "@/features/results";
import { useStudy } from "@/features/studies";
import { ForcesPlot, ResidualPlot, ResourcePlot } from "@/features/telemetry";
import { ApiError, apiUrl, errorMessage } from "@/lib/api-client";
import {
  CORE_HOURS_HINT,
  formatBytes,
  formatCoreHours,
  formatDateTime,
  formatDuration,
  formatNumber,
  plural,
  wallSeconds,
} from "@/lib/format";
import { isActiveRun } from "@/lib/types";
import { NotFoundPage } from "./not-found";

const END: Record<string, string> = {
  success: "Finished",
  exit_code: "The solver failed",
  cancelled_by_user: "Cancelled by a user",
  diverged: "Diverged",
  agent_lost: "Agent lost (no heartbeat)",
  dispatch_failed: "The backend refused to start it",
  terminated: "Terminated by the backend",
  converged: "Stopped early: converged",
  max_wall_time: "Stopped: maximum wall time",
  memory_limit: "Stopped: over its memory",
  disk_budget: "Stopped: over its disk budget",
  stalled: "Stopped: no progress",
  cancelled_by_admin: "Stopped by an administrator",
};

/** Seconds since a running run started (its wall time so far). */
const liveSeconds = (started: string | null | undefined) =>
  started ? Math.max(0, (Date.now() - Date.parse(started)) / 1000) : null;

export function RunPage() {
  const { id = "" } = useParams();
  const run = useRun(id);
  const study = useStudy(run.data?.study ?? "");
  const cancel = useCancelRun();
  const [stopOpen, stopModal] = useDisclosure(false);
  const qc = useQueryClient();
  const active = isActiveRun(run.data?.state);
  const wasActive = useRef(active);
  // when the run ends, load everything once more: the last points, log lines and archive
  useEffect(() => {
    if (wasActive.current && !active)
      void qc.invalidateQueries({ queryKey: ["runs", "detail", id] });
    wasActive.current = active;
  }, [active, qc, id]);

  if (run.isError && run.error instanceof ApiError && run.error.isNotFound)
    return <NotFoundPage what="run" />;
  if (run.isError) return <ErrorState error={run.error} onRetry={() => run.refetch()} />;
  const r = run.data;
  const studyName = study.data?.name ?? "Study";
  const crumbs = [
    { label: "Studies", to: "/studies" },
    { label: studyName, to: r ? `/studies/${r.study}` : undefined },
    { label: r ? `Run ${r.index}` : "Run" },
  ];
  if (!r)
    return (
      <>
        <PageHeader title={<Skeleton h={28} w={240} />} crumbs={crumbs} />
        <Stack gap="lg">
          <Skeleton h={110} radius="md" />
          <Skeleton h={380} radius="md" />
        </Stack>
      </>
    );

  const started = r.state !== "pending" && r.state !== "admitted";
  const objectiveSeries = Object.values(study.data?.objectives ?? {})
    .map((o) => ("series" in o ? o.series : null))
    .filter((s): s is string => !!s);

  return (
    <>
      <PageHeader
        title={`Run ${r.index}`}
        badge={
          <Group gap={6}>
            <RunStateBadge state={r.state} size="md" />
            <ReusedBadge run={r} size="md" />
            <TrustBadge trust={r.trust} detail={r.trust_detail} />
          </Group>
        }
        crumbs={crumbs}
        subtitle={Object.entries(r.parameters)
          .map(([k, v]) => `${k} = ${formatNumber(v)}`)
          .join(" · ")}
        actions={
          <>
            {r.archive_available ? (
              <Button
                size="xs"
                variant="default"
                component="a"
                href={apiUrl(`/api/v1/runs/${r.id}/archive/`)}
                leftSection={<IconDownload size={14} />}
              >
                {r.archive_bytes ? `Archive (${formatBytes(r.archive_bytes)})` : "Archive"}
              </Button>
            ) : null}
            <ContinueRunButton run={r} />
            {active && (
              <Button
                size="xs"
                color="red"
                leftSection={<IconPlayerStop size={14} />}
                onClick={stopModal.open}
                data-testid="stop-run"
              >
                Stop run
              </Button>
            )}
          </>
        }
      />
      <Stack gap="lg">
        <WaitReason run={r} />
        {r.reused && (
          <Alert
            color="grape"
            variant="light"
            title="Reused: not computed"
            data-testid="reused-alert"
          >
            {r.reused_source ? (
              <>
                This run is identical to{" "}
                <Anchor component={Link} to={`/runs/${r.reused_source.run}`}>
                  run {r.reused_source.index} of {r.reused_source.study_name}
                </Anchor>{" "}
                (same identity): it shows that run's series, objectives and archive, and cost no
                quota.
              </>
            ) : (
              "This run was reused from an identical run whose study was since deleted; it holds those results now."
            )}
          </Alert>
        )}
        {!active && r.end_reason && r.end_reason !== "success" && (
          <Alert
            color={r.state === "failed" ? "red" : r.state === "cancelled" ? "orange" : "teal"}
            variant="light"
            title={END[r.end_reason] ?? r.end_reason}
          >
            {r.message ||
              (r.exit_code !== null && r.exit_code !== undefined ? `exit code ${r.exit_code}` : "")}
          </Alert>
        )}
        <Card padding="md">
          <SimpleGrid cols={{ base: 2, sm: 3, lg: 9 }} spacing="md">
            <Fact strong label={active ? "Phase" : "Outcome"}>
              {active ? r.phase || "waiting" : (END[r.end_reason ?? ""] ?? r.state)}
            </Fact>
            <Fact strong label="Iterations" testId="run-iterations">
              {r.iterations ?? "—"}
            </Fact>
            <Fact strong label="Wall time" testId="run-wall">
              {started ? formatDuration(wallSeconds(r) ?? liveSeconds(r.started_at)) : "—"}
            </Fact>
            {active ? (
              <>
                <Fact
                  strong
                  label="CPU now"
                  testId="run-cpu"
                  hint="At the last sample (every second or two) of its processes; 100 % is one core."
                >
                  {r.cpu_percent !== null && r.cpu_percent !== undefined
                    ? `${Math.round(r.cpu_percent)} %`
                    : "—"}
                </Fact>
                <Fact
                  strong
                  label="Memory now"
                  testId="run-memory"
                  hint="Resident memory of its processes at the last sample."
                >
                  {formatBytes(r.rss_bytes)}
                </Fact>
              </>
            ) : (
              <>
                <Fact
                  strong
                  label="Peak memory"
                  testId="run-peak-memory"
                  hint="The most resident memory its steps held at once (each process's own peak, summed), as its agent measured it."
                >
                  {formatBytes(r.peak_memory_bytes)}
                </Fact>
                <Fact
                  strong
                  label="CPU time"
                  testId="run-cpu-time"
                  hint="User + system CPU time of all its steps' processes."
                >
                  {formatDuration(r.cpu_seconds)}
                </Fact>
              </>
            )}
            <Fact strong label="Core-hours" testId="run-core-hours" hint={CORE_HOURS_HINT}>
              {formatCoreHours(r.core_hours)}
            </Fact>
            <Fact strong label="Resources">
              {plural(r.processes ?? 1, "core")}, {r.memory_gb} GB
            </Fact>
            <Fact strong label="Backend">
              {r.backend}
              {r.attempt && r.attempt > 1 ? ` · attempt ${r.attempt}` : ""}
            </Fact>
            <Fact strong label={r.finished_at ? "Finished" : r.started_at ? "Started" : "Queued"}>
              <span style={{ fontFamily: "var(--mantine-font-family)" }}>
                {formatDateTime(r.finished_at ?? r.started_at ?? r.queued_at)}
              </span>
            </Fact>
          </SimpleGrid>
          {r.continuation.resumed_from && <ResumedFromNote resumed={r.continuation.resumed_from} />}
          <RunObjectives run={r} names={Object.keys(study.data?.objectives ?? {})} />
        </Card>

        <Grid gutter="lg">
          <Grid.Col span={{ base: 12, xl: 7 }}>
            <Card padding="md" h="100%">
              <Title order={3} mb="xs">
                Residuals
              </Title>
              <ResidualPlot runId={r.id} active={active} live={r.state === "running"} />
            </Card>
          </Grid.Col>
          <Grid.Col span={{ base: 12, xl: 5 }}>
            <Card padding="md" h="100%">
              <Title order={3} mb="xs">
                Forces
              </Title>
              <ForcesPlot
                runId={r.id}
                active={active}
                live={r.state === "running"}
                preferred={objectiveSeries}
              />
            </Card>
          </Grid.Col>
          <Grid.Col span={{ base: 12, xl: 5 }}>
            <Card padding="md" h="100%">
              <Title order={3} mb="xs">
                Resource usage
              </Title>
              <ResourcePlot runId={r.id} active={active} />
            </Card>
          </Grid.Col>
          <Grid.Col span={{ base: 12, xl: 7 }}>
            <Card padding="md" h="100%">
              <Title order={3} mb="xs">
                Log
              </Title>
              <LogTail runId={r.id} active={active} />
            </Card>
          </Grid.Col>
        </Grid>
        <Card padding="md">
          <Title order={3} mb="xs">
            Flow fields
          </Title>
          <FlowFields runId={r.id} ended={!active && r.state === "completed"} />
        </Card>
        {!active && r.provenance && (
          <Card padding="md">
            <Title order={3} mb="xs">
              Rerun by hand
            </Title>
            <RerunBlock run={r} provenance={r.provenance} />
          </Card>
        )}
        {r.provenance && (
          <Card padding="md">
            <Title order={3} mb="xs">
              Provenance
            </Title>
            <ProvenancePanel provenance={r.provenance} />
          </Card>
        )}
      </Stack>

      <ConfirmModal
        opened={stopOpen}
        onClose={stopModal.close}
        title={`Stop run ${r.index}?`}
        confirmLabel="Stop run"
        confirmTestId="confirm-stop"
        loading={cancel.isPending}
        error={cancel.error}
        onConfirm={() =>
          cancel.mutate(r.id, {
            onSuccess: stopModal.close,
            onError: (e) => {
              if (e instanceof ApiError && e.status === 409) {
                // it ended meanwhile: say so and show its final state
                stopModal.close();
                notifications.show({ color: "yellow", message: errorMessage(e) });
                void run.refetch();
              }
            },
          })
        }
      >
        {r.state === "pending"
          ? "The run leaves the queue and never starts."
          : "The solver is stopped now; what it wrote so far is archived."}
      </ConfirmModal>
    </>
  );
}
