import {
  Group,
  MultiSelect,
  SegmentedControl,
  Select,
  Stack,
  Text,
  TextInput,
} from "@mantine/core";
import { parseNumber } from "@/lib/values";
import { defaultInitial, type AdaptiveForm, type AdaptiveGoal } from "../lib/adaptive";
import type { WizardForm } from "../lib/form";

/**
 * An adaptive study's settings: what the surrogate is for (map the objectives, or optimise
 * one), the runs it may make in all, per batch and in its initial design, and when to stop
 * early. Each field shows its own problem, keyed like the server's (`adaptive.budget`, …).
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
    // optimise learns one objective: keep the first chosen, or the study's first
    set({
      goal,
      objectives:
        goal === "optimise" ? [a.objectives[0] ?? objectives[0] ?? ""].filter(Boolean) : [],
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
              value={a.direction}
              onChange={(v) => set({ direction: v === "min" ? "min" : "max" })}
              data={[
                { value: "max", label: "Maximise" },
                { value: "min", label: "Minimise" },
              ]}
              aria-label="Maximise or minimise the objective"
            />
          </>
        )}
      </Group>
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
          description="runs per batch"
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
          : `where the objective most likely ${a.direction === "min" ? "falls" : "rises"}`}
        , until the budget is spent
        {a.tolerance.trim() ? " or the next batch scores below the tolerance" : ""}.
      </Text>
    </Stack>
  );
}
