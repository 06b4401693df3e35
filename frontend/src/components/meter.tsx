import { Group, Progress, Stack, Text, Tooltip } from "@mantine/core";

/**
 * One quota gauge: what is in use, what queued runs would add, against the limit.
 * The bar never exceeds 100 %; queued demand beyond the limit is said in words.
 */
export function Meter({
  label,
  used,
  queued = 0,
  limit,
  format = (v: number) => String(v),
  testId,
  caption,
}: {
  label: string;
  used: number;
  queued?: number;
  limit: number;
  format?: (v: number) => string;
  testId?: string;
  /** Said under the bar instead of the queued demand (a gauge without a queue). */
  caption?: string;
}) {
  const pct = (v: number) => (limit > 0 ? Math.min(100, (v / limit) * 100) : 0);
  const usedPct = pct(used);
  const queuedPct = Math.min(100 - usedPct, pct(queued));
  const color = usedPct >= 100 ? "red" : usedPct >= 80 ? "orange" : "blue";
  return (
    <Stack gap={6} data-testid={testId}>
      <Group justify="space-between" gap="xs">
        <Text size="sm" fw={600}>
          {label}
        </Text>
        <Text size="sm" ff="monospace" c="dimmed">
          <Text span fw={600} c="var(--mantine-color-text)" ff="monospace">
            {format(used)}
          </Text>{" "}
          / {format(limit)}
        </Text>
      </Group>
      <Tooltip
        label={`${format(used)} in use, ${format(queued)} queued, limit ${format(limit)}`}
        withArrow
      >
        <Progress.Root
          size="lg"
          radius="sm"
          aria-label={`${label}: ${format(used)} of ${format(limit)} in use`}
        >
          <Progress.Section value={usedPct} color={color} aria-label={`${label} in use`} />
          <Progress.Section value={queuedPct} color="gray.4" aria-label={`${label} queued`} />
        </Progress.Root>
      </Tooltip>
      <Text size="xs" c="dimmed">
        {caption ??
          (queued > 0 ? `${format(queued)} more wanted by queued runs` : "nothing queued")}
      </Text>
    </Stack>
  );
}
