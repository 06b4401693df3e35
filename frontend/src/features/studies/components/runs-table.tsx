import {
  Anchor,
  Box,
  Checkbox,
  Group,
  Pagination,
  ScrollArea,
  Skeleton,
  Text,
  UnstyledButton,
} from "@mantine/core";
import { IconArrowDown, IconArrowUp } from "@/components/icons";
import { memo, type ReactNode } from "react";
import { Link } from "react-router";
import { ReusedBadge } from "@/components/reused-badge";
import { RunStateBadge, TrustBadge } from "@/components/state-badge";
import { ErrorState } from "@/components/states";
import {
  formatBytes,
  formatCoreHours,
  formatDuration,
  formatInt,
  formatNumber,
  formatRelative,
  wallSeconds,
} from "@/lib/format";
import { formatObjective, objectiveSwing } from "@/lib/run-values";
import type { Run } from "@/lib/types";
import type { Page } from "../api/studies";
import { RUNS_PAGE_SIZE, type RunQuery } from "../lib/run-query";
import { RunFilters } from "./run-filters";
import classes from "./runs-table.module.css";

const ROW_HEIGHT = 36;

export interface RunsTableProps {
  /** the page shown (undefined while the first one loads) */
  page: Page<Run> | undefined;
  error?: unknown;
  onRetry?: () => void;
  /** a newer page is on its way (the shown one stays until it comes) */
  fetching?: boolean;
  query: RunQuery;
  onQueryChange: (patch: Partial<RunQuery>) => void;
  parameters: string[];
  objectives: string[];
  /** runs by state, for the state chips (a study's progress) */
  counts?: Record<string, number>;
  selected?: ReadonlySet<string>;
  onToggleSelect?: (id: string) => void;
  /** tick (or untick) every run of the page shown at once */
  onSelectPage?: (ids: string[], select: boolean) => void;
  maxSelected?: number;
  /** runs across studies: a study column, the study and backend filters */
  acrossStudies?: boolean;
  studies?: { value: string; label: string }[];
  backends?: string[];
  height?: number;
}

interface Column {
  key: string;
  label: string;
  width: string;
  min: number;
  /** the API's sort key; none: not sortable */
  sort?: string;
  align?: "right";
  cell: (run: Run) => ReactNode;
}

function columnsFor(
  parameters: string[],
  objectives: string[],
  acrossStudies: boolean,
  showTrust: boolean,
): Column[] {
  const cols: Column[] = [
    {
      key: "index",
      label: "#",
      width: "64px",
      min: 64,
      sort: "index",
      cell: (r) => (
        <Anchor component={Link} to={`/runs/${r.id}`} size="sm" fw={600} ff="monospace">
          {r.index}
        </Anchor>
      ),
    },
  ];
  if (acrossStudies)
    cols.push({
      key: "study",
      label: "Study",
      width: "minmax(140px, 2fr)",
      min: 140,
      cell: (r) => (
        <Anchor component={Link} to={`/studies/${r.study}`} size="sm" truncate>
          {r.study_name}
        </Anchor>
      ),
    });
  for (const p of parameters)
    cols.push({
      key: `param.${p}`,
      label: p,
      width: "minmax(84px, 1fr)",
      min: 84,
      sort: `param.${p}`,
      align: "right",
      cell: (r) => formatNumber(r.parameters[p]),
    });
  if (acrossStudies && parameters.length === 0)
    cols.push({
      key: "parameters",
      label: "Parameters",
      width: "minmax(160px, 2fr)",
      min: 160,
      cell: (r) =>
        Object.entries(r.parameters)
          .map(([k, v]) => `${k}=${formatNumber(v)}`)
          .join(", "),
    });
  cols.push({
    key: "state",
    label: "State",
    width: "180px",
    min: 130,
    sort: "state",
    cell: (r) => (
      <>
        <RunStateBadge state={r.state} size="xs" />
        {r.reused ? (
          <Text span ml={6}>
            <ReusedBadge run={r} />
          </Text>
        ) : null}
        {r.state === "pending" && r.queue_position ? (
          <Text span size="xs" c="dimmed" ml={6}>
            #{r.queue_position}
          </Text>
        ) : null}
      </>
    ),
  });
  if (showTrust)
    cols.push({
      key: "trust",
      label: "Trust",
      width: "140px",
      min: 140,
      sort: "trust",
      cell: (r) => <TrustBadge trust={r.trust} detail={r.trust_detail} compact />,
    });
  for (const o of objectives)
    cols.push({
      key: `objective.${o}`,
      label: o,
      width: "minmax(96px, 1fr)",
      min: 96,
      sort: `objective.${o}`,
      align: "right",
      // a result only: "—" for a run that did not complete, its swing when it oscillates
      cell: (r) =>
        objectiveSwing(r, o) == null ? (
          formatObjective(r, o)
        ) : (
          <span title="oscillating: the mean of its averaged window ± half its swing">
            {formatObjective(r, o)}
          </span>
        ),
    });
  if (acrossStudies) {
    cols.push({
      key: "backend",
      label: "Backend",
      width: "110px",
      min: 110,
      cell: (r) => r.backend,
    });
    cols.push({
      key: "queued_at",
      label: "Queued",
      width: "110px",
      min: 110,
      sort: "queued_at",
      align: "right",
      cell: (r) => formatRelative(r.queued_at),
    });
  }
  cols.push({
    key: "wall",
    label: "Wall time",
    width: "96px",
    min: 96,
    align: "right",
    cell: (r) => (r.started_at ? formatDuration(wallSeconds(r)) : "—"),
  });
  cols.push({
    key: "peak_memory",
    label: "Peak memory",
    width: "104px",
    min: 104,
    sort: "peak_memory_bytes",
    align: "right",
    cell: (r) => formatBytes(r.peak_memory_bytes),
  });
  cols.push({
    key: "core_hours",
    label: "Core-h",
    width: "88px",
    min: 88,
    align: "right",
    cell: (r) =>
      r.core_hours == null ? "—" : formatCoreHours(r.core_hours).replace(" core-h", ""),
  });
  return cols;
}

/**
 * A page of runs, filtered, sorted and paged by the server (a study of 100,000 runs loads 100
 * rows): state and trust chips, ranges on parameters and objectives, a sort per column header,
 * and the pages below. The query lives in the page's URL (features/studies/lib/run-query.ts).
 */
export function RunsTable({
  page,
  error,
  onRetry,
  fetching = false,
  query,
  onQueryChange,
  parameters,
  objectives,
  counts,
  selected,
  onToggleSelect,
  onSelectPage,
  maxSelected = 8,
  acrossStudies = false,
  studies,
  backends,
  height = 480,
}: RunsTableProps) {
  const rows = page?.results ?? [];
  const showTrust =
    query.trust.length > 0 || rows.some((r) => !!r.trust) || /trust/.test(query.ordering ?? "");
  const columns = columnsFor(parameters, objectives, acrossStudies, showTrust);
  const selectable = !!onToggleSelect;
  const template = `${selectable ? "44px " : ""}${columns.map((c) => c.width).join(" ")}`;
  const minWidth = (selectable ? 44 : 0) + columns.reduce((s, c) => s + c.min, 0);
  const count = page?.count ?? 0;
  const pages = Math.max(1, Math.ceil(count / RUNS_PAGE_SIZE));
  const first = (query.page - 1) * RUNS_PAGE_SIZE;
  const frameHeight = Math.min(height, 36 + Math.max(rows.length, 3) * ROW_HEIGHT + 2);
  const filtered =
    query.state.length + query.trust.length + query.ranges.length > 0 ||
    !!query.study ||
    !!query.backend;

  const [sortKey, desc] = query.ordering?.startsWith("-")
    ? [query.ordering.slice(1), true]
    : [query.ordering, false];
  const header = (c: Column) => {
    if (!c.sort)
      return (
        <span
          key={c.key}
          className={classes.th}
          role="columnheader"
          style={{ justifyContent: c.align === "right" ? "flex-end" : "flex-start" }}
        >
          {c.label}
        </span>
      );
    const active = sortKey === c.sort;
    return (
      <UnstyledButton
        key={c.key}
        className={classes.th}
        style={{ justifyContent: c.align === "right" ? "flex-end" : "flex-start" }}
        onClick={() => onQueryChange({ ordering: active && !desc ? `-${c.sort}` : c.sort! })}
        aria-sort={active ? (desc ? "descending" : "ascending") : "none"}
        role="columnheader"
        title={`Sort by ${c.label}`}
      >
        {c.label}
        {active && (desc ? <IconArrowDown size={12} /> : <IconArrowUp size={12} />)}
      </UnstyledButton>
    );
  };

  return (
    <Box>
      <RunFilters
        query={query}
        onQueryChange={onQueryChange}
        parameters={parameters}
        objectives={objectives}
        counts={counts}
        studies={acrossStudies ? studies : undefined}
        backends={acrossStudies ? backends : undefined}
      />
      {error ? (
        <ErrorState
          error={error}
          onRetry={query.page > 1 ? () => onQueryChange({ page: 1 }) : onRetry}
        />
      ) : (
        <>
          <ScrollArea
            type="auto"
            h={frameHeight}
            className={classes.frame}
            role="table"
            aria-label="Runs"
            aria-rowcount={count}
            aria-busy={fetching || !page}
            data-testid="runs-table"
          >
            <Box miw={minWidth}>
              <div className={classes.head} style={{ gridTemplateColumns: template }} role="row">
                {selectable && (
                  <span className={classes.th} role="columnheader" aria-label="Selected">
                    {onSelectPage && rows.length > 0 && (
                      <PageCheckbox
                        ids={rows.map((r) => r.id)}
                        selected={selected}
                        onSelectPage={onSelectPage}
                      />
                    )}
                  </span>
                )}
                {columns.map(header)}
              </div>
              {!page ? (
                <Box p="sm">
                  <Skeleton h={ROW_HEIGHT * 3} />
                </Box>
              ) : rows.length === 0 ? (
                <Text c="dimmed" size="sm" p="md" ta="center">
                  {filtered ? "No run matches these filters." : "No runs yet."}
                </Text>
              ) : (
                rows.map((run, i) => (
                  <RunRow
                    key={run.id}
                    run={run}
                    template={template}
                    columns={columns}
                    selected={selected?.has(run.id) ?? false}
                    disabled={!selected?.has(run.id) && (selected?.size ?? 0) >= maxSelected}
                    onToggle={onToggleSelect}
                    rowIndex={first + i + 2}
                    testId={acrossStudies ? "run-row" : `run-row-${run.index}`}
                  />
                ))
              )}
            </Box>
          </ScrollArea>
          <Group justify="space-between" mt="xs" gap="sm">
            <Text size="xs" c="dimmed" data-testid="runs-range">
              {count === 0
                ? "0 runs"
                : `${formatInt(first + 1)}–${formatInt(first + rows.length)} of ${formatInt(count)} runs`}
              {fetching ? " · updating…" : ""}
            </Text>
            {pages > 1 && (
              <Pagination
                size="sm"
                total={pages}
                value={Math.min(query.page, pages)}
                onChange={(p) => onQueryChange({ page: p })}
                siblings={1}
                boundaries={1}
                aria-label="Pages of runs"
              />
            )}
          </Group>
        </>
      )}
    </Box>
  );
}

/** Ticks every run of the page, or unticks them once all are; mixed while some are. */
function PageCheckbox({
  ids,
  selected,
  onSelectPage,
}: {
  ids: string[];
  selected: ReadonlySet<string> | undefined;
  onSelectPage: (ids: string[], select: boolean) => void;
}) {
  const ticked = ids.filter((id) => selected?.has(id)).length;
  const all = ticked === ids.length;
  return (
    <Checkbox
      size="xs"
      checked={all}
      indeterminate={ticked > 0 && !all}
      onChange={() => onSelectPage(ids, !all)}
      aria-label="Select all runs on this page"
      data-testid="select-page"
    />
  );
}

const RunRow = memo(function RunRow({
  run,
  template,
  columns,
  selected,
  disabled,
  onToggle,
  rowIndex,
  testId,
}: {
  run: Run;
  template: string;
  columns: Column[];
  selected: boolean;
  disabled: boolean;
  onToggle?: ((id: string) => void) | undefined;
  rowIndex: number;
  testId: string;
}) {
  return (
    <div
      className={classes.row}
      style={{ gridTemplateColumns: template, height: ROW_HEIGHT }}
      role="row"
      aria-rowindex={rowIndex}
      data-selected={selected || undefined}
      data-testid={testId}
      data-state={run.state}
    >
      {onToggle && (
        <span className={classes.td} role="cell">
          <Checkbox
            size="xs"
            checked={selected}
            disabled={disabled}
            onChange={() => onToggle(run.id)}
            aria-label={`Select run ${run.index}`}
          />
        </span>
      )}
      {columns.map((c) => (
        <span
          key={c.key}
          className={`${classes.td} ${c.align === "right" ? classes.num : ""}`}
          role="cell"
        >
          {c.cell(run)}
        </span>
      ))}
    </div>
  );
});
