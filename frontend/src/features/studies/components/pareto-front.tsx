import {
  Alert,
  Group,
  Loader,
  SegmentedControl,
  Select,
  Stack,
  Text,
  useComputedColorScheme,
  useMantineTheme,
} from "@mantine/core";
import { keepPreviousData, useQuery } from "@tanstack/react-query";
import type { Layout } from "plotly.js";
import { useMemo, useState } from "react";
import { Plot } from "@/components/plot";
import { PlotSelect } from "@/components/plot-select";
import { ApiError } from "@/lib/api-client";
import { formatInt } from "@/lib/format";
import { AXIS_COLORS } from "@/lib/plot-theme";
import type { Pareto } from "@/lib/types";
import { fetchPareto } from "../api/studies";
import { studyKeys } from "../hooks/use-studies";
import {
  constraintText,
  frontAxes,
  frontGap,
  frontLabel,
  frontSummary,
  frontTraces,
  goalsQuery,
  historyTraces,
  type FrontGoal,
} from "../lib/pareto-traces";
import { adaptiveProgressText } from "../lib/surrogate-traces";

const AXES = ["x", "y", "z"] as const;

/**
 * The objectives picked, each at most once: the first two default to the study's first two
 * (both maximised), the third is there only when picked.
 */
function pickedGoals(picked: (FrontGoal | null)[], objectives: string[]): FrontGoal[] {
  const goals: FrontGoal[] = [];
  const free = (name: string | undefined) =>
    !!name && objectives.includes(name) && !goals.some((g) => g.name === name);
  for (let i = 0; i < 3; i++) {
    const p = picked[i];
    if (p && free(p.name)) goals.push(p);
    else if (i < 2) {
      const name = objectives.find(free);
      if (name) goals.push({ name, direction: p?.direction ?? "max" });
    }
  }
  return goals;
}

/**
 * The trade-off between two or three objectives: every completed run at its values, the
 * runs no other feasible run beats at everything (the Pareto front) solid, the dominated
 * ones faded, those breaking a constraint as grey crosses; for an adaptive study, the front's
 * hypervolume after each batch. A study whose plan trades objectives off (`planned`: goal
 * pareto, or constraints) shows its own; any other picks two or three of its objectives and
 * which way each is better. Asked again as runs complete (`completed`), the last answer shown
 * meanwhile.
 */
export function ParetoFrontPanel({
  studyId,
  objectives,
  completed,
  planned = false,
  onRunClick,
}: {
  studyId: string;
  /** the study's objectives, to pick from */
  objectives: string[];
  /** the study's completed runs: the front is asked for again when they change */
  completed: number;
  /** the study's adaptive plan names the objectives, directions and constraints */
  planned?: boolean;
  onRunClick?: (runId: string) => void;
}) {
  const [picked, setPicked] = useState<(FrontGoal | null)[]>([]);
  const goals = useMemo(() => pickedGoals(picked, objectives), [picked, objectives]);
  const query = planned ? {} : { objectives: goalsQuery(goals) };
  const answer = useQuery({
    queryKey: [...studyKeys.detail(studyId), "pareto", query, completed] as const,
    queryFn: ({ signal }) => fetchPareto(studyId, query, { signal }),
    enabled: planned || goals.length >= 2,
    placeholderData: keepPreviousData,
    retry: false,
  });
  const pick = (i: number, goal: FrontGoal | null) => {
    const next: (FrontGoal | null)[] = [...goals];
    next[i] = goal;
    setPicked(next);
  };
  const data = answer.data;

  return (
    <Stack gap="sm" data-testid="pareto">
      {!planned && (
        <Group gap="md" wrap="wrap" align="flex-end" data-testid="pareto-objectives">
          {AXES.slice(0, Math.min(3, objectives.length)).map((axis, i) => {
            const goal = goals[i];
            const others = goals.filter((_, j) => j !== i).map((g) => g.name);
            const options = objectives.filter((o) => !others.includes(o));
            return (
              <Group key={axis} gap={6} align="flex-end" wrap="nowrap">
                {i < 2 ? (
                  <PlotSelect
                    label={axis}
                    data={options}
                    value={goal?.name ?? null}
                    onPick={(name) => pick(i, { name, direction: goal?.direction ?? "max" })}
                    w={130}
                  />
                ) : (
                  <Select
                    size="xs"
                    label={axis}
                    placeholder="(none: 2-D)"
                    data={options}
                    value={goal?.name ?? null}
                    onChange={(name) =>
                      pick(i, name ? { name, direction: goal?.direction ?? "max" } : null)
                    }
                    clearable
                    w={130}
                  />
                )}
                {goal && (
                  <SegmentedControl
                    size="xs"
                    value={goal.direction}
                    onChange={(v) => pick(i, { ...goal, direction: v === "min" ? "min" : "max" })}
                    data={[
                      { value: "max", label: "max ↑" },
                      { value: "min", label: "min ↓" },
                    ]}
                    aria-label={`Maximise or minimise ${goal.name}`}
                  />
                )}
              </Group>
            );
          })}
        </Group>
      )}
      {!planned && goals.length < 2 ? (
        <Text size="sm" c="dimmed">
          A trade-off needs two objectives; this study has{" "}
          {objectives.length ? `only ${objectives[0]}` : "none"}.
        </Text>
      ) : answer.isError ? (
        <Alert color="gray" variant="light" data-testid="pareto-refused">
          {answer.error instanceof ApiError ? answer.error.message : "Could not find the front."}
        </Alert>
      ) : !data ? (
        <Group gap="xs" data-testid="pareto-loading">
          <Loader size="sm" type="dots" />
          <Text size="sm" c="dimmed">
            Finding the runs on the front…
          </Text>
        </Group>
      ) : (
        <FrontView front={data} onRunClick={onRunClick} />
      )}
    </Stack>
  );
}

function FrontView({
  front,
  onRunClick,
}: {
  front: Pareto;
  onRunClick: ((runId: string) => void) | undefined;
}) {
  const scheme = useComputedColorScheme("light");
  const theme = useMantineTheme();
  const solid = scheme === "dark" ? theme.colors.blue[4] : theme.colors.blue[8];
  const grey = scheme === "dark" ? theme.colors.gray[5] : theme.colors.gray[6];
  const data = useMemo(
    () => frontTraces(front, { front: solid, others: solid, infeasible: grey }),
    [front, solid, grey],
  );
  const history = useMemo(() => historyTraces(front, solid), [front, solid]);
  const layout = useMemo<Partial<Layout>>(() => {
    const axes = frontAxes(front);
    const colors = AXIS_COLORS[scheme];
    const axis = (i: number) => ({ title: { text: axes[i]?.title ?? "" }, zeroline: false });
    // a new choice of objectives starts from its own zoom
    const uirevision = front.objectives.map((o) => `${o.name}:${o.direction}`).join(",");
    if (axes.length === 3)
      return {
        uirevision,
        showlegend: true,
        margin: { l: 0, r: 0, t: 30, b: 0 },
        scene: {
          xaxis: { ...axis(0), ...colors },
          yaxis: { ...axis(1), ...colors },
          zaxis: { ...axis(2), ...colors },
        },
      };
    return { uirevision, showlegend: true, xaxis: axis(0), yaxis: axis(1) };
  }, [front, scheme]);
  const historyLayout = useMemo<Partial<Layout>>(
    () => ({
      margin: { l: 56, r: 12, t: 12, b: 40 },
      xaxis: { title: { text: "batch" }, dtick: 1, zeroline: false },
      yaxis: { title: { text: "% of the box" }, range: [0, 100], zeroline: false },
      showlegend: false,
    }),
    [],
  );
  const shown = front.runs.length;

  return (
    <Stack gap="sm">
      <div>
        <Text size="sm" data-testid="pareto-summary">
          {frontSummary(front)}
        </Text>
        {front.constraints.length > 0 && (
          <Text size="xs" c="dimmed" data-testid="pareto-constraints">
            Within {front.constraints.map(constraintText).join(", ")}: a run outside is never on the
            front.
          </Text>
        )}
      </div>
      <Plot
        data={data}
        layout={layout}
        height={front.objectives.length === 3 ? 460 : 380}
        aria-label={frontLabel(front)}
        data-testid="pareto-plot"
        emptyMessage={frontGap(front)}
        onPointClick={(pt) => typeof pt.customdata === "string" && onRunClick?.(pt.customdata)}
      />
      {shown < front.completed && (
        <Text size="xs" c="dimmed" data-testid="pareto-shown">
          The plot shows every run on the front and the latest others: {formatInt(shown)} of{" "}
          {formatInt(front.completed)} completed runs.
        </Text>
      )}
      {history.length > 0 && (
        <div>
          <Group justify="space-between" gap="xs">
            <Text size="sm" fw={600}>
              Hypervolume after each batch
            </Text>
            {front.progress && (
              <Text size="xs" c="dimmed" data-testid="pareto-progress">
                {adaptiveProgressText(front.progress)}
              </Text>
            )}
          </Group>
          <Text size="xs" c="dimmed">
            The share of the box between the best values and the reference point that the front
            dominates: it levels off as the batches stop finding better trade-offs.
          </Text>
          <Plot
            data={history}
            layout={historyLayout}
            height={200}
            aria-label="Hypervolume after each batch"
            data-testid="pareto-history"
          />
        </div>
      )}
    </Stack>
  );
}
