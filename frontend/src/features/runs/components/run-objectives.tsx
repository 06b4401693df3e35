import { Badge, Group, Stack, Text } from "@mantine/core";
import { formatNumber } from "@/lib/format";
import { formatObjective, objectiveSwing, runCompleted } from "@/lib/run-values";
import { isActiveRun, type Run } from "@/lib/types";

function Value({
  name,
  text,
  note,
  testId,
}: {
  name: string;
  text: string;
  note?: string | undefined;
  testId: string;
}) {
  return (
    <Stack gap={0} maw={320}>
      <Text size="xs" c="dimmed">
        {name}
      </Text>
      <Text fw={700} size="lg" ff="monospace" data-testid={testId}>
        {text}
      </Text>
      {note && (
        <Text size="xs" c="var(--mantine-color-orange-light-color)" lineClamp={3} title={note}>
          {note}
        </Text>
      )}
    </Stack>
  );
}

/**
 * A run's objectives: results only ("—" for each when the run did not complete, with why an
 * objective has none, and its swing when it oscillates), and apart from them, labelled so,
 * what an incomplete run's partial series give.
 */
export function RunObjectives({ run, names }: { run: Run; names: string[] }) {
  const ended = !isActiveRun(run.state);
  const all = [...new Set([...names, ...Object.keys(run.objectives ?? {})])];
  const partial = Object.entries(run.partial_objectives ?? {});
  const errors = run.trust_detail?.objective_errors ?? {};
  if (all.length === 0 || (!ended && Object.keys(run.objectives ?? {}).length === 0)) return null;
  const complete = runCompleted(run);
  return (
    <Stack
      gap="sm"
      mt="md"
      pt="md"
      style={{ borderTop: "1px solid var(--mantine-color-default-border)" }}
    >
      <Group gap="xl" data-testid="run-objectives">
        {all.map((k) => {
          const value = run.objectives?.[k];
          const swing = objectiveSwing(run, k);
          const note =
            value == null
              ? complete
                ? errors[k]
                : "no result: the run did not complete"
              : swing != null
                ? "oscillating: the mean of its averaged window ± half its swing"
                : undefined;
          return (
            <Value
              key={k}
              name={k}
              text={`${formatObjective(run, k, 5)}${swing != null && value != null ? " (oscillating)" : ""}`}
              note={note}
              testId={`objective-${k}`}
            />
          );
        })}
      </Group>
      {!complete && partial.length > 0 && (
        <Stack gap={4} data-testid="partial-objectives">
          <Group gap={6}>
            <Badge color="orange" variant="light" size="sm" radius="sm">
              Partial (run did not complete)
            </Badge>
            <Text size="xs" c="dimmed">
              read from the series it left when it ended; not results, and used by no plot,
              surrogate or comparison
            </Text>
          </Group>
          <Group gap="xl">
            {partial.map(([k, v]) => (
              <Value key={k} name={k} text={formatNumber(v, 5)} testId={`partial-${k}`} />
            ))}
          </Group>
        </Stack>
      )}
    </Stack>
  );
}
