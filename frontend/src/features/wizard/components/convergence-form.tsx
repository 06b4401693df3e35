import { Checkbox, Group, Paper, Select, SimpleGrid, Stack, Text, TextInput } from "@mantine/core";
import type { ConvergenceForm as Form, WizardForm } from "../lib/form";

/**
 * The study's convergence policy: stop diverging runs, stop converged runs early, a wall
 * time limit. Written as `convergence` in the spec only when something is switched on.
 */
export function ConvergenceForm({
  form,
  update,
  errors,
}: {
  form: WizardForm;
  update: (patch: Partial<WizardForm>) => void;
  errors: Record<string, string>;
}) {
  const c = form.convergence;
  const set = (patch: Partial<Form>) => update({ convergence: { ...c, ...patch } });
  const objectiveNames = form.objectives.map((o) => o.name).filter(Boolean);
  const general = errors.convergence;
  return (
    <Stack gap="sm" data-testid="convergence-form">
      <SimpleGrid cols={{ base: 1, md: 3 }} spacing="sm">
        <Paper withBorder p="sm" radius="md">
          <Checkbox
            label="Stop runs that diverge"
            checked={c.diverge}
            onChange={(e) => set({ diverge: e.currentTarget.checked })}
            fw={600}
          />
          <Stack gap={6} mt="xs" pl={30} opacity={c.diverge ? 1 : 0.5}>
            <Checkbox
              size="xs"
              label="when a residual becomes NaN"
              checked={c.nan}
              disabled={!c.diverge}
              onChange={(e) => set({ nan: e.currentTarget.checked })}
            />
            <TextInput
              size="xs"
              label="when a residual exceeds"
              value={c.residualAbove}
              disabled={!c.diverge}
              onChange={(e) => set({ residualAbove: e.currentTarget.value })}
              error={errors["convergence.diverge.residual_above"]}
              w={140}
            />
          </Stack>
        </Paper>
        <Paper withBorder p="sm" radius="md">
          <Text fw={600} size="sm" mb={6}>
            Stop runs early when converged
          </Text>
          <Stack gap={6}>
            <Group gap="xs" align="flex-end" wrap="nowrap">
              <Checkbox
                size="xs"
                label="all residuals below"
                checked={c.converge}
                onChange={(e) => set({ converge: e.currentTarget.checked })}
                mb={6}
              />
              <TextInput
                size="xs"
                w={90}
                value={c.residualBelow}
                disabled={!c.converge}
                onChange={(e) => set({ residualBelow: e.currentTarget.value })}
                error={errors["convergence.converge.residual_below"]}
                aria-label="Residual threshold"
              />
            </Group>
            <Checkbox
              size="xs"
              label="an objective stops changing"
              checked={c.objective}
              onChange={(e) => set({ objective: e.currentTarget.checked })}
            />
            <Group gap={6} pl={26} opacity={c.objective ? 1 : 0.5} wrap="nowrap" align="flex-start">
              <Select
                size="xs"
                w={90}
                data={objectiveNames}
                value={c.objectiveName || null}
                onChange={(v) => set({ objectiveName: v ?? "" })}
                disabled={!c.objective}
                aria-label="Objective"
                placeholder="Cl"
                error={errors["convergence.converge.objective.name"]}
              />
              <TextInput
                size="xs"
                w={70}
                value={c.window}
                onChange={(e) => set({ window: e.currentTarget.value })}
                disabled={!c.objective}
                aria-label="Window (iterations)"
                description="window"
                error={errors["convergence.converge.objective.window"]}
              />
              <TextInput
                size="xs"
                w={76}
                value={c.tolerance}
                onChange={(e) => set({ tolerance: e.currentTarget.value })}
                disabled={!c.objective}
                aria-label="Relative tolerance"
                description="tolerance"
                error={errors["convergence.converge.objective.tolerance"]}
              />
            </Group>
          </Stack>
        </Paper>
        <Paper withBorder p="sm" radius="md">
          <Checkbox
            label="Limit wall time per run"
            checked={c.maxWall}
            onChange={(e) => set({ maxWall: e.currentTarget.checked })}
            fw={600}
          />
          <TextInput
            mt="xs"
            ml={30}
            size="xs"
            w={120}
            label="minutes"
            value={c.maxWallMinutes}
            disabled={!c.maxWall}
            onChange={(e) => set({ maxWallMinutes: e.currentTarget.value })}
            error={errors["convergence.max_wall_seconds"]}
          />
        </Paper>
      </SimpleGrid>
      {general && (
        <Text c="red" size="sm" role="alert">
          {general}
        </Text>
      )}
      <Text size="xs" c="dimmed">
        Runs judged by the policy get a trust flag (converged, not converged, diverged) in the
        results.
      </Text>
    </Stack>
  );
}
