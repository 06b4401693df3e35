import {
  Anchor,
  Box,
  Checkbox,
  Group,
  ScrollArea,
  SegmentedControl,
  Text,
  TextInput,
  UnstyledButton,
} from "@mantine/core";
import { IconArrowDown, IconArrowUp, IconSearch } from "@/components/icons";
import { useVirtualizer } from "@tanstack/react-virtual";
import { memo, useMemo, useRef, useState } from "react";
import { Link } from "react-router";
import { RunStateBadge, TrustBadge } from "@/components/state-badge";
import { formatDuration, formatNumber } from "@/lib/format";
import type { Run, RunState } from "@/lib/types";
import classes from "./runs-table.module.css";

export type RunFilter = "all" | "active" | "completed" | "failed";

const FILTERS: Record<RunFilter, (s: RunState | undefined) => boolean> = {
  all: () => true,
  active: (s) => s === "pending" || s === "admitted" || s === "provisioning" || s === "running",
  completed: (s) => s === "completed",
  failed: (s) => s === "failed" || s === "cancelled",
};

type SortKey = { kind: "index" | "state" | "wall" } | { kind: "param" | "objective"; name: string };

const ROW_HEIGHT = 36;

function compare(a: unknown, b: unknown): number {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

function sortValue(run: Run, key: SortKey): unknown {
  switch (key.kind) {
    case "index":
      return run.index;
    case "state":
      return run.state;
    case "wall":
      return run.wall_seconds;
    case "param":
      return run.parameters[key.name];
    case "objective":
      return run.objectives?.[key.name];
  }
}

export interface RunsTableProps {
  runs: Run[];
  parameters: string[];
  objectives: string[];
  selected: ReadonlySet<string>;
  onToggleSelect: (id: string) => void;
  filter: RunFilter;
  onFilterChange: (f: RunFilter) => void;
  height?: number;
  maxSelected?: number;
}

/**
 * The runs of a study: one row per run, virtualised (only the visible rows exist in the DOM),
 * so 10,000 runs scroll as smoothly as 10.
 */
export function RunsTable({
  runs,
  parameters,
  objectives,
  selected,
  onToggleSelect,
  filter,
  onFilterChange,
  height = 440,
  maxSelected = 8,
}: RunsTableProps) {
  const showTrust = useMemo(() => runs.some((r) => !!r.trust), [runs]);
  const [sort, setSort] = useState<{ key: SortKey; desc: boolean }>({
    key: { kind: "index" },
    desc: false,
  });
  const [query, setQuery] = useState("");
  const scrollRef = useRef<HTMLDivElement>(null);

  const counts = useMemo(() => {
    const c: Record<RunFilter, number> = { all: runs.length, active: 0, completed: 0, failed: 0 };
    for (const r of runs) {
      if (FILTERS.active(r.state)) c.active += 1;
      else if (FILTERS.completed(r.state)) c.completed += 1;
      else if (FILTERS.failed(r.state)) c.failed += 1;
    }
    return c;
  }, [runs]);

  const rows = useMemo(() => {
    const q = query.trim().toLowerCase();
    const keep = FILTERS[filter];
    const filtered = runs.filter(
      (r) =>
        keep(r.state) &&
        (!q ||
          String(r.index) === q ||
          Object.entries(r.parameters).some(([k, v]) => `${k}=${v}`.toLowerCase().includes(q))),
    );
    if (sort.key.kind === "index" && !sort.desc) return filtered;
    const sorted = [...filtered].sort((a, b) =>
      compare(sortValue(a, sort.key), sortValue(b, sort.key)),
    );
    return sort.desc ? sorted.reverse() : sorted;
  }, [runs, filter, query, sort]);

  const virtualizer = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 12,
    initialRect: { width: 1200, height },
  });

  const columns = `44px 64px ${parameters.map(() => "minmax(84px, 1fr)").join(" ")} 130px ${showTrust ? "140px " : ""}${objectives
    .map(() => "minmax(96px, 1fr)")
    .join(" ")} 96px`;
  const minWidth =
    44 + 64 + parameters.length * 84 + 130 + (showTrust ? 140 : 0) + objectives.length * 96 + 96;
  // Short tables shrink to their rows; long ones scroll inside a fixed frame.
  const frameHeight = Math.min(height, 36 + Math.max(rows.length, 3) * ROW_HEIGHT + 2);

  const header = (label: string, key: SortKey, align: "left" | "right" = "left") => {
    const active = JSON.stringify(sort.key) === JSON.stringify(key);
    return (
      <UnstyledButton
        className={classes.th}
        style={{ justifyContent: align === "right" ? "flex-end" : "flex-start" }}
        onClick={() => setSort({ key, desc: active ? !sort.desc : false })}
        aria-sort={active ? (sort.desc ? "descending" : "ascending") : "none"}
        role="columnheader"
      >
        {label}
        {active && (sort.desc ? <IconArrowDown size={12} /> : <IconArrowUp size={12} />)}
      </UnstyledButton>
    );
  };

  return (
    <Box>
      <Group justify="space-between" mb="sm" gap="sm" wrap="wrap">
        <SegmentedControl
          size="xs"
          value={filter}
          onChange={(v) => onFilterChange(v as RunFilter)}
          data={[
            { value: "all", label: `All ${counts.all}` },
            { value: "active", label: `Active ${counts.active}` },
            { value: "completed", label: `Completed ${counts.completed}` },
            { value: "failed", label: `Failed/cancelled ${counts.failed}` },
          ]}
          aria-label="Filter runs by state"
        />
        <TextInput
          size="xs"
          placeholder="Find: run # or aoa=4"
          leftSection={<IconSearch size={14} />}
          value={query}
          onChange={(e) => setQuery(e.currentTarget.value)}
          aria-label="Find runs"
          w={220}
        />
      </Group>
      <ScrollArea
        type="auto"
        h={frameHeight}
        viewportRef={scrollRef}
        className={classes.frame}
        role="table"
        aria-label="Runs"
        aria-rowcount={rows.length}
        data-testid="runs-table"
      >
        <Box miw={minWidth}>
          <div className={classes.head} style={{ gridTemplateColumns: columns }} role="row">
            <span
              className={classes.th}
              role="columnheader"
              aria-label="Select for residual plot"
            />
            {header("#", { kind: "index" })}
            {parameters.map((p) => (
              <span key={p} style={{ display: "contents" }}>
                {header(p, { kind: "param", name: p }, "right")}
              </span>
            ))}
            {header("State", { kind: "state" })}
            {showTrust && (
              <span className={classes.th} role="columnheader">
                Trust
              </span>
            )}
            {objectives.map((o) => (
              <span key={o} style={{ display: "contents" }}>
                {header(o, { kind: "objective", name: o }, "right")}
              </span>
            ))}
            {header("Wall time", { kind: "wall" }, "right")}
          </div>
          {rows.length === 0 ? (
            <Text c="dimmed" size="sm" p="md" ta="center">
              {runs.length === 0 ? "This study has no runs yet." : "No run matches this filter."}
            </Text>
          ) : (
            <div style={{ height: virtualizer.getTotalSize(), position: "relative" }}>
              {virtualizer.getVirtualItems().map((item) => {
                const run = rows[item.index]!;
                return (
                  <RunRow
                    key={run.id}
                    run={run}
                    columns={columns}
                    top={item.start}
                    parameters={parameters}
                    objectives={objectives}
                    selected={selected.has(run.id)}
                    disabled={!selected.has(run.id) && selected.size >= maxSelected}
                    onToggle={onToggleSelect}
                    rowIndex={item.index + 2}
                    showTrust={showTrust}
                  />
                );
              })}
            </div>
          )}
        </Box>
      </ScrollArea>
    </Box>
  );
}

const RunRow = memo(function RunRow({
  run,
  columns,
  top,
  parameters,
  objectives,
  selected,
  disabled,
  onToggle,
  rowIndex,
  showTrust,
}: {
  run: Run;
  columns: string;
  top: number;
  parameters: string[];
  objectives: string[];
  selected: boolean;
  disabled: boolean;
  onToggle: (id: string) => void;
  rowIndex: number;
  showTrust: boolean;
}) {
  return (
    <div
      className={classes.row}
      style={{
        gridTemplateColumns: columns,
        transform: `translateY(${top}px)`,
        height: ROW_HEIGHT,
      }}
      role="row"
      aria-rowindex={rowIndex}
      data-selected={selected || undefined}
      data-testid={`run-row-${run.index}`}
      data-state={run.state}
    >
      <span className={classes.td} role="cell">
        <Checkbox
          size="xs"
          checked={selected}
          disabled={disabled}
          onChange={() => onToggle(run.id)}
          aria-label={`Show residuals of run ${run.index}`}
        />
      </span>
      <span className={classes.td} role="cell">
        <Anchor component={Link} to={`/runs/${run.id}`} size="sm" fw={600} ff="monospace">
          {run.index}
        </Anchor>
      </span>
      {parameters.map((p) => (
        <span key={p} className={`${classes.td} ${classes.num}`} role="cell">
          {formatNumber(run.parameters[p])}
        </span>
      ))}
      <span className={classes.td} role="cell">
        <RunStateBadge state={run.state} size="xs" />
        {run.state === "pending" && run.queue_position ? (
          <Text span size="xs" c="dimmed" ml={6}>
            #{run.queue_position}
          </Text>
        ) : null}
      </span>
      {showTrust && (
        <span className={classes.td} role="cell">
          <TrustBadge trust={run.trust} />
        </span>
      )}
      {objectives.map((o) => (
        <span key={o} className={`${classes.td} ${classes.num}`} role="cell">
          {formatNumber(run.objectives?.[o])}
        </span>
      ))}
      <span className={`${classes.td} ${classes.num}`} role="cell">
        {run.started_at ? formatDuration(run.wall_seconds) : "—"}
      </span>
    </div>
  );
});
