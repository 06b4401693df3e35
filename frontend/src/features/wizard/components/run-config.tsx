import {
  Alert,
  Badge,
  Code,
  Group,
  Input,
  NumberInput,
  Paper,
  Select,
  SimpleGrid,
  Stack,
  Switch,
  Text,
} from "@mantine/core";
import { useId, useMemo } from "react";
import { formatGb, plural } from "@/lib/format";
import type { Backend, Preview, SolverPackage } from "@/lib/types";
import type { WizardForm } from "../lib/form";
import { isSteadySolver } from "../lib/to-spec";

/** Solver (from packages), processes, memory and backend of every run. */
export function RunConfig({
  form,
  update,
  errors,
  packages,
  backends,
  templateSolvers,
  preview,
}: {
  form: WizardForm;
  update: (patch: Partial<WizardForm>) => void;
  errors: Record<string, string>;
  packages: SolverPackage[];
  backends: Backend[];
  templateSolvers: string[] | null;
  preview: Preview | undefined;
}) {
  const solvers = useMemo(() => {
    const all = packages.flatMap((p) => p.provides?.solvers ?? []);
    return [...new Set(templateSolvers ?? all)].sort();
  }, [packages, templateSolvers]);
  const pkg = packages.find((p) => p.provides?.solvers?.includes(form.solver ?? ""));
  const backend =
    backends.find((b) => b.name === form.backend) ??
    backends.find((b) => b.kind === "local") ??
    backends[0];
  const mode = form.processes > 1 ? "mpi" : "serial";

  return (
    <Stack gap="lg">
      <SimpleGrid cols={{ base: 1, md: 2 }} spacing="lg">
        <Stack gap="sm">
          <Select
            label="Solver"
            description={
              templateSolvers
                ? "the solvers this template works with"
                : "every solver the installed packages provide"
            }
            data={solvers}
            value={form.solver}
            onChange={(v) => update({ solver: v })}
            searchable
            error={errors.solver}
            data-testid="solver-select"
          />
          {pkg && (
            <Paper withBorder p="sm" radius="md" bg="var(--mantine-color-default-hover)">
              <Group gap={6} mb={4}>
                <Text size="sm" fw={600}>
                  {pkg.name}
                </Text>
                <Badge size="xs" variant="outline" radius="sm">
                  {pkg.version}
                </Badge>
              </Group>
              <Text size="xs" c="dimmed" mb={6}>
                {pkg.description}
              </Text>
              <Group gap={4}>
                {Object.keys(pkg.run_configurations ?? {}).map((name) => (
                  <Badge
                    key={name}
                    size="xs"
                    variant={name === mode ? "filled" : "light"}
                    radius="sm"
                  >
                    {name}
                  </Badge>
                ))}
              </Group>
            </Paper>
          )}
          {isSteadySolver(form.solver) && (
            <WarmStartSwitch
              checked={form.warmStart}
              onChange={(warmStart) => update({ warmStart })}
              error={errors.warm_start}
            />
          )}
        </Stack>
        <Stack gap="sm">
          <Select
            label="Backend"
            description="where the runs execute"
            data={backends.map((b) => ({
              value: b.name,
              label: `${b.name} (${b.kind}) · ${plural(b.cores, "core")}, ${formatGb(b.memory_gb)}`,
            }))}
            value={form.backend ?? backend?.name ?? null}
            onChange={(v) => update({ backend: v })}
            error={errors.backend}
            allowDeselect={false}
          />
          <SimpleGrid cols={3} spacing="xs">
            <NumberInput
              label="Processes"
              description={form.processes > 1 ? "MPI ranks" : "serial"}
              min={1}
              max={4096}
              value={form.processes}
              onChange={(v) => update({ processes: typeof v === "number" ? v : Number(v) || 1 })}
              error={
                errors["resources.processes"] ??
                (errors.resources && !errors["resources.memory_gb"] ? errors.resources : undefined)
              }
              allowDecimal={false}
              data-testid="processes-input"
            />
            <NumberInput
              label="Nodes"
              description="hosts per run"
              min={1}
              max={256}
              value={form.nodes}
              onChange={(v) => update({ nodes: typeof v === "number" ? v : Number(v) || 1 })}
              error={errors["resources.nodes"]}
              allowDecimal={false}
            />
            <NumberInput
              label="Memory"
              description="GB per run"
              min={0.1}
              step={0.5}
              decimalScale={2}
              value={form.memoryGb}
              onChange={(v) => update({ memoryGb: typeof v === "number" ? v : Number(v) || 0 })}
              error={errors["resources.memory_gb"]}
            />
          </SimpleGrid>
        </Stack>
      </SimpleGrid>
      <div>
        <Text size="sm" fw={600} mb={4}>
          What each run executes ({mode === "mpi" ? `${form.processes} MPI processes` : "serial"})
        </Text>
        {preview ? (
          <Code block data-testid="run-steps">
            {preview.steps.map((s) => s.argv.join(" ")).join("\n") || "(nothing)"}
          </Code>
        ) : (
          <Text size="sm" c="dimmed">
            The commands appear when the spec is valid.
          </Text>
        )}
      </div>
      {errors.prepare && <Alert color="red">{errors.prepare}</Alert>}
    </Stack>
  );
}

/**
 * The spec's `warm_start`, offered for steady solvers. Its description and the API's refusal
 * (a backend whose runs share no folder) describe the switch; they sit outside its label, so
 * its name stays "Warm start".
 */
function WarmStartSwitch({
  checked,
  onChange,
  error,
}: {
  checked: boolean;
  onChange: (on: boolean) => void;
  error: string | undefined;
}) {
  const id = useId();
  return (
    <Stack gap={4}>
      <Switch
        label="Warm start"
        checked={checked}
        onChange={(e) => onChange(e.currentTarget.checked)}
        aria-describedby={error ? `${id}-description ${id}-error` : `${id}-description`}
        aria-invalid={!!error}
        error={!!error}
        data-testid="warm-start"
      />
      <Input.Description id={`${id}-description`}>
        Start each run from the nearest completed run&apos;s converged fields — fewer iterations,
        same converged answer; across meshes through mapFields
      </Input.Description>
      {error && <Input.Error id={`${id}-error`}>{error}</Input.Error>}
    </Stack>
  );
}
