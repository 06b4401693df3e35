import {
  Badge,
  Button,
  Card,
  Code,
  Collapse,
  Grid,
  Group,
  Skeleton,
  Stack,
  Text,
  Title,
  Tooltip,
  UnstyledButton,
} from "@mantine/core";
import { IconChevronRight } from "@/components/icons";
import { type ReactNode, useMemo, useState } from "react";
import { useNavigate, useParams, useSearchParams } from "react-router";
import { PageHeader } from "@/components/page-header";
import { usePatchSearchParams } from "@/lib/search-params";
import { StudyStateBadge } from "@/components/state-badge";
import { ErrorState } from "@/components/states";
import {
  ContinueSelectedButton,
  describeRunFilter,
  MAX_SELECTED_RUNS,
  ObjectivePlot,
  plotQueryFor,
  runsPageState,
  RunsTable,
  StudyActions,
  StudyProgress,
  isFrontStudy,
  MeshIndependencePanel,
  ParetoFrontPanel,
  SensitivityPanel,
  SurrogateMap,
  useRunQueryInUrl,
  useRunSelectionInUrl,
  useSelectedRuns,
  useStudy,
  useStudyPlot,
  useStudyRunsPage,
  useStudySurrogate,
  type ObjectivePlotView,
} from "@/features/studies";
import { NotifyBell } from "@/features/notifications";
import { StudyResultsPanel } from "@/features/results";
import { ResidualOverlay } from "@/features/telemetry";
import { ApiError } from "@/lib/api-client";
import {
  CORE_HOURS_HINT,
  formatCoreHours,
  formatCoreHoursRange,
  formatDateTime,
  formatGb,
  formatNumber,
  plural,
} from "@/lib/format";
import { splitParameters } from "@/lib/spec";
import { specToYaml } from "@/lib/spec-text";
import { isActiveRun, isActiveStudy } from "@/lib/types";
import { NotFoundPage } from "./not-found";

/** The selected runs whose residuals and fields the page shows at once (the first ticked). */
const SHOWN = 8;

export function StudyPage() {
  const { id = "" } = useParams();
  const navigate = useNavigate();
  const [params] = useSearchParams();
  const study = useStudy(id);
  const active = isActiveStudy(study.data?.state);
  const live = active || study.data?.state === undefined;
  const [query, setQuery] = useRunQueryInUrl();
  const runs = useStudyRunsPage(id, query, { active: live });
  const [meshOpen, setMeshOpen] = useState(false);
  const [sensitivityOpen, setSensitivityOpen] = useState(false);
  // null: as the study suggests (open for a study whose batches are after the front)
  const [paretoOpen, setParetoOpen] = useState<boolean | null>(null);
  const [specOpen, setSpecOpen] = useState(false);

  const setParam = usePatchSearchParams();

  const split = useMemo(() => splitParameters(study.data?.spec ?? { name: "" }), [study.data]);
  const parameters = split.varied;
  const objectives = useMemo(() => Object.keys(study.data?.objectives ?? {}), [study.data]);
  const selection = useRunSelectionInUrl();
  const shownIds = useMemo(() => selection.ids.slice(0, SHOWN), [selection.ids]);
  const selectedRuns = useSelectedRuns(shownIds, runs.data?.results);

  const view: ObjectivePlotView = {
    objective:
      params.get("obj") && objectives.includes(params.get("obj")!)
        ? params.get("obj")!
        : ((objectives.includes("Cl") ? "Cl" : objectives[0]) ?? ""),
    x:
      params.get("x") && parameters.includes(params.get("x")!)
        ? params.get("x")!
        : (parameters[0] ?? ""),
    // a grid reads best as one line per value of the second parameter; zipped or sampled
    // parameters move together, so one line
    group: params.has("group")
      ? params.get("group") || null
      : (study.data?.spec.combine ?? "grid") === "grid"
        ? (parameters[1] ?? null)
        : null,
    mode: params.get("mode") === "heatmap" ? "heatmap" : "lines",
  };
  const setView = (v: ObjectivePlotView) =>
    setParam({
      obj: v.objective,
      x: v.x,
      group: v.group ?? "",
      mode: v.mode === "heatmap" ? "heatmap" : null,
    });

  // the plot shows the runs the table lists: one filter for both
  const plot = useStudyPlot(id, study.data ? plotQueryFor(view, query) : null, { active: live });
  const filterWords = describeRunFilter(query);
  const adaptive = study.data?.spec.combine === "adaptive" && study.data.state !== "draft";
  const surrogateAxes = { x: params.get("sx"), y: params.get("sy") };
  // the objectives the surrogate learns: the one shown sets the slice of a map of 3+ parameters
  const learnt = study.data?.spec.adaptive?.objectives ?? objectives;
  const surrogateObjective = params.get("sobj") ?? "";
  const surrogate = useStudySurrogate(
    id,
    adaptive
      ? {
          ...surrogateAxes,
          objective: learnt.includes(surrogateObjective) ? surrogateObjective : null,
        }
      : null,
    { active: live },
  );

  const overlayRuns = useMemo(
    () =>
      selectedRuns.map((r) => ({
        id: r.id,
        active: isActiveRun(r.state),
        label: `#${r.index} ${parameters.map((p) => `${p}=${r.parameters[p]}`).join(" ")}`,
      })),
    [selectedRuns, parameters],
  );

  if (study.isError && study.error instanceof ApiError && study.error.isNotFound)
    return <NotFoundPage what="study" />;
  if (study.isError) return <ErrorState error={study.error} onRetry={() => study.refetch()} />;
  const s = study.data;
  const crumbs = [{ label: "Studies", to: "/studies" }, { label: s?.name ?? "…" }];
  if (!s)
    return (
      <>
        <PageHeader title={<Skeleton h={28} w={320} />} crumbs={crumbs} />
        <Stack gap="lg">
          <Skeleton h={90} radius="md" />
          <Skeleton h={420} radius="md" />
          <Skeleton h={480} radius="md" />
        </Stack>
      </>
    );

  const sampled =
    s.spec.combine === "lhs" || s.spec.combine === "random" || s.spec.combine === "adaptive";
  const frontStudy = isFrontStudy(s.spec);
  const frontOpen = paretoOpen ?? frontStudy;
  return (
    <>
      <PageHeader
        title={s.name}
        badge={<StudyStateBadge state={s.state} progress={s.progress} size="md" />}
        crumbs={crumbs}
        subtitle={
          <>
            {s.template ? `Template ${s.template}` : "Uploaded case"} · {s.solver} ·{" "}
            {s.resources.processes} {s.resources.processes === 1 ? "core" : "cores"},{" "}
            {formatGb(s.resources.memory_gb)} per run · backend {s.backend} · by {s.owner},{" "}
            {formatDateTime(s.created_at)}
            {split.fixed.length > 0 && (
              <>
                <br />
                Fixed: {split.fixed.map(([k, v]) => `${k} = ${formatNumber(v)}`).join(", ")}
              </>
            )}
          </>
        }
        actions={
          <Group gap="xs" wrap="nowrap">
            <NotifyBell study={{ id: s.id, name: s.name, state: s.state }} />
            <StudyActions study={s} />
          </Group>
        }
      />
      <Stack gap="lg">
        {s.description && (
          <Text size="sm" maw={900}>
            {s.description}
          </Text>
        )}
        <Card padding="md">
          <Group justify="space-between" mb="xs">
            <Text fw={600} size="sm">
              Progress
            </Text>
            <Group gap="xs">
              <Tooltip label={CORE_HOURS_HINT} multiline w={320} withArrow>
                <Text
                  size="xs"
                  c="dimmed"
                  data-testid="study-core-hours"
                  style={{ cursor: "help" }}
                >
                  {formatCoreHours(s.core_hours)} used
                </Text>
              </Tooltip>
              {s.estimate?.core_hours && (
                <Tooltip label={s.estimate.summary} multiline w={320} withArrow>
                  <Text
                    size="xs"
                    c="dimmed"
                    data-testid="study-estimate"
                    style={{ cursor: "help" }}
                  >
                    · estimated {formatCoreHoursRange(s.estimate.core_hours)}
                  </Text>
                </Tooltip>
              )}
              <Text size="xs" c="dimmed">
                · {s.submitted_at ? `submitted ${formatDateTime(s.submitted_at)}` : "not submitted"}
                {s.finished_at ? ` · finished ${formatDateTime(s.finished_at)}` : ""}
              </Text>
            </Group>
          </Group>
          <StudyProgress progress={s.progress} size="lg" />
        </Card>

        {s.state === "draft" ? (
          <Card padding="lg">
            <Text size="sm" c="dimmed">
              This is a draft with {plural(s.run_count ?? 0, "run")} planned. Edit it or submit it
              to start.
            </Text>
          </Card>
        ) : (
          <>
            <Grid gutter="lg">
              <Grid.Col span={{ base: 12, xl: 7 }}>
                <Card padding="md" h="100%">
                  <Title order={3} mb={filterWords ? 4 : "sm"}>
                    Results
                  </Title>
                  {filterWords && (
                    <Text size="xs" c="dimmed" mb="sm" data-testid="plot-filter">
                      The runs the table&apos;s filters select: {filterWords}
                    </Text>
                  )}
                  {objectives.length === 0 || parameters.length === 0 ? (
                    <Text size="sm" c="dimmed" py="xl" ta="center">
                      {objectives.length === 0
                        ? "This study has no objectives, so there is nothing to plot against its parameters."
                        : "This study varies no parameter."}
                    </Text>
                  ) : plot.isError ? (
                    <ErrorState error={plot.error} onRetry={() => plot.refetch()} />
                  ) : (
                    <ObjectivePlot
                      plot={plot.data}
                      runCount={s.progress.total}
                      parameters={parameters}
                      objectives={objectives}
                      view={view}
                      onViewChange={setView}
                      sampled={sampled}
                      onRunClick={(runId) => navigate(`/runs/${runId}`)}
                    />
                  )}
                </Card>
              </Grid.Col>
              <Grid.Col span={{ base: 12, xl: 5 }}>
                <Card padding="md" h="100%">
                  <Title order={3} mb="sm">
                    Convergence
                  </Title>
                  <ResidualOverlay runs={overlayRuns} />
                </Card>
              </Grid.Col>
            </Grid>

            {adaptive && (
              <Card padding="md">
                <Title order={3} mb="sm">
                  Surrogate map
                </Title>
                {surrogate.isError ? (
                  <ErrorState error={surrogate.error} onRetry={() => surrogate.refetch()} />
                ) : (
                  <SurrogateMap
                    surrogate={surrogate.data}
                    objective={surrogateObjective}
                    objectiveSpecs={s.objectives ?? {}}
                    onObjectiveChange={(v) => setParam({ sobj: v })}
                    axes={surrogateAxes}
                    onAxesChange={(a) => setParam({ sx: a.x, sy: a.y })}
                  />
                )}
              </Card>
            )}

            {/* a trade-off needs two objectives and a completed run with values of them */}
            {objectives.length >= 2 && s.progress.completed > 0 && (
              <DisclosureCard
                title="Pareto front"
                open={frontOpen}
                onToggle={() => setParetoOpen(!frontOpen)}
                testId="pareto-toggle"
              >
                <ParetoFrontPanel
                  studyId={s.id}
                  objectives={objectives}
                  completed={s.progress.completed}
                  planned={frontStudy}
                  onRunClick={(runId) => navigate(`/runs/${runId}`)}
                />
              </DisclosureCard>
            )}

            {parameters.length > 0 && (
              <DisclosureCard
                title="Mesh independence"
                open={meshOpen}
                onToggle={() => setMeshOpen((o) => !o)}
                testId="mesh-independence-toggle"
              >
                <MeshIndependencePanel studyId={s.id} parameters={parameters} />
              </DisclosureCard>
            )}

            {/* the indices need objectives and a surrogate of completed runs; computed on opening */}
            {parameters.length > 0 && objectives.length > 0 && s.progress.completed > 0 && (
              <DisclosureCard
                title="Sensitivity"
                open={sensitivityOpen}
                onToggle={() => setSensitivityOpen((o) => !o)}
                testId="sensitivity-toggle"
              >
                <SensitivityPanel studyId={s.id} />
              </DisclosureCard>
            )}

            <StudyResultsPanel
              studyId={s.id}
              parameters={parameters}
              objectives={objectives}
              selected={overlayRuns}
              active={active}
              onRunClick={(runId) => navigate(`/runs/${runId}`)}
            />

            <Card padding="md">
              <Group justify="space-between" mb="sm">
                <Title order={3}>Runs</Title>
                <Group gap="xs">
                  <Text size="xs" c="dimmed" data-testid="selection-count">
                    {selection.ids.length === 0
                      ? `tick runs to compare their residuals (the first ${SHOWN}) or to continue them`
                      : `${plural(selection.ids.length, "run")} selected${
                          selection.ids.length > SHOWN
                            ? `; residuals and fields of the first ${SHOWN}`
                            : ""
                        }`}
                  </Text>
                  {selection.ids.length > 0 && (
                    <Button size="compact-xs" variant="subtle" onClick={selection.clear}>
                      Clear selection
                    </Button>
                  )}
                  <ContinueSelectedButton studyId={s.id} runIds={selection.ids} />
                </Group>
              </Group>
              <RunsTable
                {...runsPageState(runs)}
                query={query}
                onQueryChange={setQuery}
                parameters={parameters}
                objectives={objectives}
                counts={s.progress.by_state}
                selected={selection.selected}
                onToggleSelect={selection.toggle}
                onSelectPage={selection.selectPage}
                maxSelected={MAX_SELECTED_RUNS}
              />
            </Card>
          </>
        )}

        <Card padding="md">
          <Disclosure open={specOpen} onToggle={() => setSpecOpen((o) => !o)}>
            <Text fw={600} size="sm">
              Study spec
            </Text>
            <Badge size="xs" variant="light">
              YAML
            </Badge>
          </Disclosure>
          <Collapse in={specOpen}>
            <Code block mt="sm">
              {specToYaml(s.spec)}
            </Code>
          </Collapse>
        </Card>
      </Stack>
    </>
  );
}

/** A card whose title opens and closes it; what it holds is made only while it is open
 * (an analysis computed on request is asked for on opening). */
function DisclosureCard({
  title,
  open,
  onToggle,
  testId,
  children,
}: {
  title: string;
  open: boolean;
  onToggle: () => void;
  testId: string;
  children: ReactNode;
}) {
  return (
    <Card padding="md">
      <Disclosure open={open} onToggle={onToggle} testId={testId}>
        <Text fw={600} size="sm">
          {title}
        </Text>
      </Disclosure>
      {open && <Stack mt="sm">{children}</Stack>}
    </Card>
  );
}

/** A section's title that opens and closes it, its chevron pointing down while open. */
function Disclosure({
  open,
  onToggle,
  testId,
  children,
}: {
  open: boolean;
  onToggle: () => void;
  testId?: string;
  children: ReactNode;
}) {
  return (
    <UnstyledButton onClick={onToggle} aria-expanded={open} data-testid={testId}>
      <Group gap={6}>
        <IconChevronRight
          size={16}
          style={{ transform: open ? "rotate(90deg)" : undefined, transition: "transform 120ms" }}
        />
        {children}
      </Group>
    </UnstyledButton>
  );
}
