import { Group, Progress, Stack, Text, Tooltip } from "@mantine/core";
import { formatInt } from "@/lib/format";
import { RUN_STATES, runStateColor, runStateLabel } from "@/lib/states";
import type { RunState, Study } from "@/lib/types";
import { cancellingSummary, progressSummary } from "./progress-summary";

/** A bar split by run state, with the counts spelled out. */
export function StudyProgress({
  progress,
  size = "md",
  showCounts = true,
}: {
  progress: Study["progress"];
  size?: "sm" | "md" | "lg";
  showCounts?: boolean;
}) {
  const total = progress.total || 0;
  const by = progress.by_state as Record<RunState, number>;
  const order: RunState[] = [
    "completed",
    "failed",
    "cancelled",
    "running",
    "provisioning",
    "admitted",
  ];
  return (
    <Stack gap={6}>
      <Progress.Root
        size={size}
        radius="sm"
        aria-label={`${formatInt(by.completed ?? 0)} of ${formatInt(total)} runs completed`}
      >
        {total > 0 &&
          order.map((s) =>
            by[s] ? (
              <Tooltip key={s} label={`${by[s]} ${runStateLabel(s).toLowerCase()}`} withArrow>
                <Progress.Section
                  value={(by[s] / total) * 100}
                  color={runStateColor(s)}
                  aria-label={`Runs ${runStateLabel(s).toLowerCase()}`}
                />
              </Tooltip>
            ) : null,
          )}
      </Progress.Root>
      {showCounts && (
        <Group gap="md" wrap="wrap">
          <Text size="xs" fw={600}>
            {progressSummary(progress)}
          </Text>
          {progress.cancelling > 0 && (
            <Text size="xs" c="dimmed" data-testid="cancelling">
              {cancellingSummary(progress)}
            </Text>
          )}
          {RUN_STATES.filter((s) => by[s]).map((s) => (
            <Group key={s} gap={4} wrap="nowrap">
              <span
                aria-hidden
                style={{
                  width: 8,
                  height: 8,
                  borderRadius: 2,
                  background: `var(--mantine-color-${runStateColor(s)}-${s === "pending" ? 4 : 6})`,
                }}
              />
              <Text size="xs" c="dimmed" data-testid={`count-${s}`}>
                {runStateLabel(s)} {formatInt(by[s])}
              </Text>
            </Group>
          ))}
        </Group>
      )}
    </Stack>
  );
}
