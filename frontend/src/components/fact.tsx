import { Stack, Text } from "@mantine/core";
import type { ReactNode } from "react";

/** A small dimmed label over its value in monospace (a run's facts, its provenance). */
export function Fact({
  label,
  children,
  testId,
  strong = false,
}: {
  label: string;
  children: ReactNode;
  testId?: string;
  /** set the value in a heavier weight */
  strong?: boolean;
}) {
  return (
    <Stack gap={0}>
      <Text size="xs" c="dimmed">
        {label}
      </Text>
      <Text
        size="sm"
        fw={strong ? 500 : undefined}
        ff="monospace"
        data-testid={testId}
        style={{ overflowWrap: "anywhere" }}
        component="div"
      >
        {children}
      </Text>
    </Stack>
  );
}
