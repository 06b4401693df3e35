import {
  Autocomplete,
  Checkbox,
  Group,
  Paper,
  SimpleGrid,
  Stack,
  Text,
  TextInput,
} from "@mantine/core";
import type { ReactNode } from "react";
import type { ConvergenceForm as Form, WizardForm } from "../lib/form";
import { seriesProblem, type OfferedSeries } from "../lib/series";

function Toggle({
  checked,
  onChange,
  label,
  children,
}: {
  checked: boolean;
  onChange: (v: boolean) => void;
  label: string;
  children?: ReactNode;
}) {
  return (
    <Group gap="xs" wrap="nowrap" align="center" mih={30}>
      <Checkbox
        size="xs"
        label={label}
        checked={checked}
        onChange={(e) => onChange(e.currentTarget.checked)}
      />
      {children}
    </Group>
  );
}

/**
 * The study's convergence policy: when to stop a diverging run, when a run has converged
 * (it then stops early), and a wall-time limit. The spec carries `convergence` only when it
 * differs from what the portal does anyway (stop a run whose residuals become NaN).
 */
export function ConvergenceForm({
  form,
  update,
  errors,
  offered = null,
}: {
  form: WizardForm;
  update: (patch: Partial<WizardForm>) => void;
  errors: Record<string, string>;
  /** The series the case's inspection says its runs send. */
  offered?: OfferedSeries | null;
}) {
  const c = form.convergence;
  const set = (patch: Partial<Form>) => update({ convergence: { ...c, ...patch } });
  const seriesHints = offered
    ? offered.series
    : [
        ...new Set(
          form.objectives.filter((o) => o.kind === "series" && o.series).map((o) => o.series),
        ),
      ];
  const field = (
    key: keyof Form,
    label: string,
    disabled: boolean,
    error: string | undefined,
    w = 84,
  ) => (
    <TextInput
      size="xs"
      w={w}
      value={String(c[key])}
      disabled={disabled}
      onChange={(e) => set({ [key]: e.currentTarget.value } as Partial<Form>)}
      aria-label={label}
      error={error}
    />
  );
  return (
    <Stack gap="sm" data-testid="convergence-form">
      <SimpleGrid cols={{ base: 1, md: 3 }} spacing="sm">
        <Paper withBorder p="sm" radius="md">
          <Text fw={600} size="sm" mb={6}>
            Stop a run that diverges
          </Text>
          <Stack gap={4}>
            <Toggle
              checked={c.nan}
              onChange={(v) => set({ nan: v })}
              label="a residual becomes NaN"
            />
            <Toggle
              checked={c.residualAboveOn}
              onChange={(v) => set({ residualAboveOn: v })}
              label="a residual exceeds"
            >
              {field(
                "residualAbove",
                "Residual limit",
                !c.residualAboveOn,
                errors["convergence.diverge.residual_above"],
              )}
            </Toggle>
            <Toggle
              checked={c.courantAboveOn}
              onChange={(v) => set({ courantAboveOn: v })}
              label="the Courant number exceeds"
            >
              {field(
                "courantAbove",
                "Courant limit",
                !c.courantAboveOn,
                errors["convergence.diverge.courant_above"],
                64,
              )}
            </Toggle>
          </Stack>
        </Paper>
        <Paper withBorder p="sm" radius="md">
          <Text fw={600} size="sm" mb={6}>
            Stop early when converged
          </Text>
          <Stack gap={4}>
            <Toggle
              checked={c.residualsBelowOn}
              onChange={(v) => set({ residualsBelowOn: v })}
              label="all residuals below"
            >
              {field(
                "residualsBelow",
                "Residual threshold",
                !c.residualsBelowOn,
                errors["convergence.converge.residuals_below"],
              )}
            </Toggle>
            <Toggle
              checked={c.objectiveOn}
              onChange={(v) => set({ objectiveOn: v })}
              label="a series settles"
            />
            <Group gap={6} pl={26} wrap="nowrap" align="flex-start">
              <Autocomplete
                size="xs"
                w={140}
                data={seriesHints}
                value={c.objectiveSeries}
                onChange={(v) => set({ objectiveSeries: v })}
                disabled={!c.objectiveOn}
                placeholder="forceCoeffs.Cl"
                aria-label="Series that must settle"
                limit={200}
                error={
                  errors["convergence.converge.objective.series"] ??
                  (c.objectiveOn ? seriesProblem(c.objectiveSeries, offered) : null)
                }
              />
              <TextInput
                size="xs"
                w={60}
                value={c.window}
                onChange={(e) => set({ window: e.currentTarget.value })}
                disabled={!c.objectiveOn}
                aria-label="Window (points)"
                description="window"
                error={errors["convergence.converge.objective.window"]}
              />
              <TextInput
                size="xs"
                w={70}
                value={c.tolerance}
                onChange={(e) => set({ tolerance: e.currentTarget.value })}
                disabled={!c.objectiveOn}
                aria-label="Relative tolerance"
                description="tolerance"
                error={errors["convergence.converge.objective.tolerance"]}
              />
            </Group>
          </Stack>
        </Paper>
        <Paper withBorder p="sm" radius="md">
          <Text fw={600} size="sm" mb={6}>
            Limits
          </Text>
          <Stack gap={4}>
            <Toggle
              checked={c.maxWallOn}
              onChange={(v) => set({ maxWallOn: v })}
              label="wall time at most (min)"
            >
              {field(
                "maxWallMinutes",
                "Wall time limit in minutes",
                !c.maxWallOn,
                errors["convergence.max_wall_seconds"],
                64,
              )}
            </Toggle>
            <Group gap="xs" wrap="nowrap" mih={30}>
              <Text size="xs">judge no run before iteration</Text>
              {field(
                "minIterations",
                "Minimum iterations",
                false,
                errors["convergence.min_iterations"],
                64,
              )}
            </Group>
          </Stack>
        </Paper>
      </SimpleGrid>
      {errors.convergence && (
        <Text c="var(--mantine-color-red-light-color)" size="sm" role="alert">
          {errors.convergence}
        </Text>
      )}
      <Text size="xs" c="dimmed">
        Each run gets a trust flag from this policy (converged, not converged, diverged), shown in
        the runs table and the results.
      </Text>
    </Stack>
  );
}
