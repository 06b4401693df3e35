import { Stack, Text, Tooltip } from "@mantine/core";
import type { ReactNode } from "react";

/** A small dimmed label over its value in monospace (a run's facts, its provenance). */
export function Fact({
  label,
  children,
  testId,
  strong = false,
  hint,
}: {
  label: string;
  children: ReactNode;
  testId?: string;
  /** set the value in a heavier weight */
  strong?: boolean;
  /** what the figure means, shown on hovering its label */
  hint?: string;
}) {
  const title = (
    <Text
      size="xs"
      c="dimmed"
      style={
        hint
          ? { textDecoration: "underline dotted", cursor: "help", width: "fit-content" }
          : undefined
      }
    >
      {label}
    </Text>
  );
  return (
    <Stack gap={0}>
      {hint ? (
        <Tooltip label={hint} multiline w={320} withArrow>
          {title}
        </Tooltip>
      ) : (
        title
      )}
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
