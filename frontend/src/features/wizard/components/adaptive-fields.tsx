import {
  ActionIcon,
  Button,
  Group,
  MultiSelect,
  SegmentedControl,
  Select,
  Stack,
  Text,
  TextInput,
} from "@mantine/core";
import { IconPlus, IconTrash } from "@/components/icons";
import { parseNumber } from "@/lib/values";
import {
  aims,
  defaultInitial,
  directionOf,
  newConstraint,
  type AdaptiveForm,
  type AdaptiveGoal,
  type ConstraintRow,
  type Sense,
} from "../lib/adaptive";
import type { WizardForm } from "../lib/form";

const SENSES = [
  { value: "max", label: "Maximise" },
  { value: "min", label: "Minimise" },
];
const sense = (v: string): Sense => (v === "min" ? "min" : "max");

/**
 * An adaptive study's settings: what the surrogate is for (map the objectives, optimise one,
 * or find the trade-offs between two or three), the ranges the runs must keep, the runs it may
 * make in all, per batch and in its initial design, and when to stop early. Each field shows
 * its own problem, keyed like the server's (`adaptive.budget`, `adaptive.constraints.Cl`, …).
 */
export function AdaptiveFields({
  form,
  update,
  errors,
}: {
  form: WizardForm;
  update: (patch: Partial<WizardForm>) => void;
  errors: Record<string, string>;
}) {
  const a = form.adaptive;
  const set = (patch: Partial<AdaptiveForm>) => update({ adaptive: { ...a, ...patch } });
  const objectives = form.objectives.map((o) => o.name).filter(Boolean);
  const varied = form.parameters.filter((r) => r.mode === "sampled").length;
  const initial = defaultInitial(varied, parseNumber(a.budget));
  const setGoal = (goal: AdaptiveGoal) =>
    // optimise learns one objective: keep the first chosen, or the study's first; a Pareto
    // front keeps up to three of those chosen
    set({
      goal,
      objectives:
        goal === "optimise"
          ? [a.objectives[0] ?? objectives[0] ?? ""].filter(Boolean)
          : goal === "pareto"
            ? a.objectives.slice(0, 3)
            : [],
    });
  return (
    <Stack gap="sm" data-testid="adaptive-fields">
      <Group gap="sm" align="flex-end" wrap="wrap">
        <Stack gap={4}>
          <Text size="sm" fw={500}>
            Goal
          </Text>
          <SegmentedControl
            size="xs"
            value={a.goal}
            onChange={(v) => setGoal(v as AdaptiveGoal)}
            data={[
              { value: "map", label: "Map the objectives" },
              { value: "optimise", label: "Optimise one" },
              { value: "pareto", label: "Pareto front (trade-off)" },
            ]}
            aria-label="Goal of the adaptive sampling"
          />
        </Stack>
        {a.goal === "map" ? (
          <MultiSelect
            label="Objectives to map"
            placeholder={a.objectives.length ? undefined : "all of the study's"}
            data={objectives}
            value={a.objectives}
            onChange={(objectives) => set({ objectives })}
            error={errors["adaptive.objectives"]}
            w={280}
            clearable
            data-testid="adaptive-objectives"
          />
        ) : a.goal === "pareto" ? (
          <MultiSelect
            label="Objectives to trade off"
            description="two or three"
            data={objectives}
            value={a.objectives}
            onChange={(objectives) => set({ objectives })}
            maxValues={3}
            error={errors["adaptive.objectives"]}
            w={280}
            clearable
            data-testid="adaptive-pareto-objectives"
          />
        ) : (
          <>
            <Select
              label="Objective"
              data={objectives}
              value={a.objectives[0] ?? null}
              onChange={(v) => set({ objectives: v ? [v] : [] })}
              error={errors["adaptive.objectives"]}
              w={160}
              allowDeselect={false}
              data-testid="adaptive-objective"
            />
            <SegmentedControl
              size="xs"
              value={a.direction === "min" ? "min" : "max"}
              onChange={(v) => set({ direction: sense(v) })}
              data={SENSES}
              aria-label="Maximise or minimise the objective"
            />
          </>
        )}
      </Group>
      {a.goal === "pareto" && a.objectives.length > 0 && (
        <Stack gap={4} data-testid="adaptive-directions">
          <Group gap="md" wrap="wrap">
            {a.objectives.map((o) => (
              <Group key={o} gap={6} wrap="nowrap">
                <Text size="sm" ff="monospace">
                  {o}
                </Text>
                <SegmentedControl
                  size="xs"
                  value={directionOf(a, o)}
                  onChange={(v) => set({ directions: { ...a.directions, [o]: sense(v) } })}
                  data={SENSES}
                  aria-label={`Maximise or minimise ${o}`}
                  data-testid={`adaptive-direction-${o}`}
                />
              </Group>
            ))}
          </Group>
          {errors["adaptive.direction"] && (
            <Text size="xs" c="red">
              {errors["adaptive.direction"]}
            </Text>
          )}
        </Stack>
      )}
      {aims(a.goal) && (
        <ConstraintsEditor
          rows={a.constraints}
          objectives={objectives}
          errors={errors}
          onChange={(constraints) => set({ constraints })}
        />
      )}
      <Group gap="sm" align="flex-start" wrap="wrap">
        <TextInput
          label="Budget"
          description="runs in all"
          w={120}
          value={a.budget}
          onChange={(e) => set({ budget: e.currentTarget.value })}
          error={errors["adaptive.budget"]}
          data-testid="adaptive-budget"
        />
        <TextInput
          label="Batch size"
          description="runs per batch, or auto"
          w={120}
          value={a.batch}
          onChange={(e) => set({ batch: e.currentTarget.value })}
          error={errors["adaptive.batch"]}
          data-testid="adaptive-batch"
        />
        <TextInput
          label="Initial design"
          description="first runs"
          placeholder={String(initial)}
          w={120}
          value={a.initial}
          onChange={(e) => set({ initial: e.currentTarget.value })}
          error={errors["adaptive.initial"]}
          data-testid="adaptive-initial"
        />
        <TextInput
          label="Tolerance"
          description="stop early below"
          placeholder="none"
          w={120}
          value={a.tolerance}
          onChange={(e) => set({ tolerance: e.currentTarget.value })}
          error={errors["adaptive.tolerance"]}
          data-testid="adaptive-tolerance"
        />
        <TextInput
          label="Seed"
          description="same seed, same points"
          w={120}
          value={form.seed}
          onChange={(e) => update({ seed: e.currentTarget.value })}
        />
      </Group>
      <Text size="xs" c="dimmed">
        {a.initial.trim() ? "The initial design" : `An initial design of ${initial} runs`} (a Latin
        hypercube) runs first; then the surrogate places each batch{" "}
        {a.goal === "map"
          ? "where the map is most likely wrong"
          : a.goal === "pareto"
            ? "where it most likely pushes the front of best trade-offs further"
            : `where the objective most likely ${a.direction === "min" ? "falls" : "rises"}`}
        {a.constraints.length && aims(a.goal) ? " within the constraints" : ""}, until the budget is
        spent
        {a.tolerance.trim() ? " or the next batch scores below the tolerance" : ""}.
      </Text>
    </Stack>
  );
}

/**
 * The ranges the runs must keep (`Cl ≥ 0.5`, `Cd ≤ 0.02`): a row per objective, with a min, a
 * max or both. A run outside them is never the best nor on the front.
 */
function ConstraintsEditor({
  rows,
  objectives,
  errors,
  onChange,
}: {
  rows: ConstraintRow[];
  objectives: string[];
  errors: Record<string, string>;
  onChange: (rows: ConstraintRow[]) => void;
}) {
  const set = (key: string, patch: Partial<ConstraintRow>) =>
    onChange(rows.map((r) => (r.key === key ? { ...r, ...patch } : r)));
  return (
    <Stack gap={6} data-testid="adaptive-constraints">
      <Group gap="sm" align="center">
        <Text size="sm" fw={500}>
          Constraints
        </Text>
        <Text size="xs" c="dimmed">
          ranges the runs must keep
        </Text>
        <Button
          size="compact-xs"
          variant="light"
          leftSection={<IconPlus size={14} />}
          onClick={() => onChange([...rows, newConstraint()])}
        >
          Add constraint
        </Button>
      </Group>
      {errors["adaptive.constraints"] && (
        <Text size="xs" c="red">
          {errors["adaptive.constraints"]}
        </Text>
      )}
      {rows.map((row, i) => {
        const name = row.objective || `row ${i + 1}`;
        const err = errors[`adaptive.constraints.${row.objective.trim() || row.key}`];
        const errId = `constraint-error-${row.key}`;
        // the row's problem describes the row, a group: each input is marked invalid
        return (
          <Stack
            key={row.key}
            gap={2}
            role="group"
            aria-label={`Constraint on ${name}`}
            aria-describedby={err ? errId : undefined}
            data-testid={`constraint-row-${i}`}
          >
            <Group gap="xs" align="flex-start" wrap="nowrap">
              <Select
                size="xs"
                w={160}
                placeholder="objective"
                aria-label={`Objective of constraint ${i + 1}`}
                // a saved spec may name an objective the study no longer has: keep it shown
                data={
                  row.objective && !objectives.includes(row.objective)
                    ? [...objectives, row.objective]
                    : objectives
                }
                value={row.objective || null}
                onChange={(v) => set(row.key, { objective: v ?? "" })}
                error={!!err}
              />
              <TextInput
                size="xs"
                w={100}
                placeholder="min"
                leftSection="≥"
                aria-label={`Lowest ${name}`}
                value={row.min}
                onChange={(e) => set(row.key, { min: e.currentTarget.value })}
                error={!!err}
              />
              <TextInput
                size="xs"
                w={100}
                placeholder="max"
                leftSection="≤"
                aria-label={`Highest ${name}`}
                value={row.max}
                onChange={(e) => set(row.key, { max: e.currentTarget.value })}
                error={!!err}
              />
              <ActionIcon
                variant="subtle"
                color="gray"
                mt={2}
                onClick={() => onChange(rows.filter((r) => r.key !== row.key))}
                aria-label={`Remove the constraint on ${name}`}
              >
                <IconTrash size={16} />
              </ActionIcon>
            </Group>
            {err && (
              <Text id={errId} size="xs" c="red">
                {err}
              </Text>
            )}
          </Stack>
        );
      })}
    </Stack>
  );
}
