import {
  Alert,
  Group,
  Loader,
  SegmentedControl,
  Stack,
  Text,
  useComputedColorScheme,
  useMantineTheme,
} from "@mantine/core";
import { useQuery } from "@tanstack/react-query";
import type { Data, Layout } from "plotly.js";
import { useMemo, useState } from "react";
import { Plot } from "@/components/plot";
import { ApiError } from "@/lib/api-client";
import type { Sensitivity, SensitivityObjective } from "@/lib/types";
import { fetchSensitivity } from "../api/studies";
import { studyKeys } from "../hooks/use-studies";

type Index = SensitivityObjective["indices"][number];

/** An index as the panel reads it: two decimals, as the intervals are only that sure. */
function idx(x: number): string {
  return Number.isFinite(x) ? x.toFixed(2) : "—";
}

function interval(iv: number[], value: number): [number, number] {
  return [iv[0] ?? value, iv[1] ?? value];
}

/** "S 0.31 [0.28, 0.34] · ST 0.56 [0.50, 0.61]" */
function hoverText(i: Index): string {
  const [fl, fh] = interval(i.first_interval, i.first);
  const [tl, th] = interval(i.total_interval, i.total);
  return `S ${idx(i.first)} [${idx(fl)}, ${idx(fh)}] · ST ${idx(i.total)} [${idx(tl)}, ${idx(th)}]`;
}

/** The parameters by total index, largest first (the one the objective depends on most). */
function byTotal(indices: Index[]): Index[] {
  return [...indices].sort(
    (a, b) => b.total - a.total || b.first - a.first || a.parameter.localeCompare(b.parameter),
  );
}

/**
 * Which parameters each objective depends on: per objective, its first-order (S) and total
 * (ST) Sobol indices with their confidence intervals, computed on a surrogate fitted to the
 * study's completed runs; the objectives without enough runs yet are named with how many they
 * have. A study that varies no number over a range has nothing to rank: a quiet note.
 */
export function SensitivityPanel({ studyId }: { studyId: string }) {
  const [shown, setShown] = useState<string | null>(null);
  const answer = useQuery({
    queryKey: [...studyKeys.detail(studyId), "sensitivity"] as const,
    queryFn: ({ signal }) => fetchSensitivity(studyId, {}, { signal }),
    retry: false,
  });
  const data = answer.data;
  const names = data?.objectives.map((o) => o.name) ?? [];
  const objective = shown && names.includes(shown) ? shown : (names[0] ?? "");
  const chosen = data?.objectives.find((o) => o.name === objective);

  if (answer.isError) {
    const error = answer.error;
    if (error instanceof ApiError && error.status === 400 && error.field === "parameters")
      return (
        <Text size="sm" c="dimmed" data-testid="sensitivity-none">
          This study varies no number over a range, so there is no sensitivity to show.
        </Text>
      );
    return (
      <Alert color="gray" variant="light" data-testid="sensitivity-refused">
        {error instanceof ApiError ? error.message : "Could not compute it."}
      </Alert>
    );
  }
  if (!data)
    return (
      <Group gap="xs" data-testid="sensitivity-loading">
        <Loader size="sm" type="dots" />
        <Text size="sm" c="dimmed">
          Fitting a surrogate to the completed runs…
        </Text>
      </Group>
    );
  return (
    <Stack gap="sm" data-testid="sensitivity">
      <Text size="xs" c="dimmed">
        S: share of the objective&apos;s variance a parameter explains alone; ST: with its
        interactions. A parameter with ST ≈ 0 can be fixed.
      </Text>
      {names.length > 1 && (
        <SegmentedControl
          size="xs"
          value={objective}
          onChange={setShown}
          data={names}
          aria-label="Objective"
          data-testid="sensitivity-objective"
          style={{ alignSelf: "flex-start" }}
        />
      )}
      {chosen ? (
        <>
          <SensitivityPlot objective={chosen} />
          <Text size="xs" c="dimmed" data-testid="sensitivity-caption">
            On a surrogate of {chosen.runs} completed runs; {Math.round(100 * data.confidence)} %
            intervals from {data.samples} samples.
          </Text>
        </>
      ) : (
        <Text size="sm" c="dimmed">
          No objective has the {data.runs_needed} completed runs it needs yet.
        </Text>
      )}
      <Skipped data={data} />
    </Stack>
  );
}

function Skipped({ data }: { data: Sensitivity }) {
  if (data.skipped.length === 0) return null;
  return (
    <Stack gap={2} data-testid="sensitivity-skipped">
      {data.skipped.map((s) => (
        <Text key={s.name} size="xs" c="dimmed">
          {s.name}: not yet ({s.reason})
        </Text>
      ))}
    </Stack>
  );
}

function SensitivityPlot({ objective }: { objective: SensitivityObjective }) {
  const scheme = useComputedColorScheme("light");
  const theme = useMantineTheme();
  const solid = scheme === "dark" ? theme.colors.blue[4] : theme.colors.blue[8];
  const light = scheme === "dark" ? theme.colors.blue[9] : theme.colors.blue[2];
  const rows = useMemo(() => byTotal(objective.indices), [objective]);
  const data = useMemo<Data[]>(() => {
    const y = rows.map((r) => r.parameter);
    const hover = rows.map(hoverText);
    const bar = (name: string, key: "first" | "total", colour: string): Data => {
      const ivs = rows.map((r) => interval(r[`${key}_interval`], r[key]));
      return {
        type: "bar",
        orientation: "h",
        name,
        x: rows.map((r) => r[key]),
        y,
        marker: { color: colour },
        error_x: {
          type: "data",
          symmetric: false,
          array: rows.map((r, i) => Math.max(0, ivs[i]![1] - r[key])),
          arrayminus: rows.map((r, i) => Math.max(0, r[key] - ivs[i]![0])),
          color: scheme === "dark" ? theme.colors.gray[4] : theme.colors.gray[7],
          thickness: 1,
          width: 3,
        },
        customdata: hover,
        hovertemplate: "<b>%{y}</b><br>%{customdata}<extra></extra>",
      };
    };
    return [bar("first-order (S)", "first", solid), bar("total (ST)", "total", light)];
  }, [rows, solid, light, scheme, theme]);
  const layout = useMemo<Partial<Layout>>(() => {
    const top = Math.max(
      1,
      ...rows.map((r) => interval(r.total_interval, r.total)[1]),
      ...rows.map((r) => interval(r.first_interval, r.first)[1]),
    );
    return {
      barmode: "group",
      bargap: 0.3,
      xaxis: { title: { text: "Sobol index" }, range: [0, top * 1.02] },
      // the parameter the objective depends on most on top
      yaxis: { autorange: "reversed", automargin: true },
      showlegend: true,
    };
  }, [rows]);
  return (
    <Plot
      data={data}
      layout={layout}
      height={Math.max(180, 90 + 44 * rows.length)}
      aria-label={`Sensitivity of ${objective.name} to the parameters`}
      data-testid="sensitivity-plot"
    />
  );
}
