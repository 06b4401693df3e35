import { Box, Code, Group, ScrollArea, SegmentedControl, Text } from "@mantine/core";
import { useEffect, useRef, useState } from "react";
import { ErrorState } from "@/components/states";
import { useRunLog } from "../hooks/use-run";

/** The end of the solver log; follows new lines while the user is at the bottom. */
export function LogTail({ runId, active }: { runId: string; active: boolean }) {
  const [lines, setLines] = useState(200);
  const log = useRunLog(runId, { active, lines });
  const viewport = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);

  useEffect(() => {
    const el = viewport.current;
    if (el && atBottom.current) el.scrollTop = el.scrollHeight;
  }, [log.data]);

  return (
    <Box>
      <Group justify="space-between" mb={6}>
        <Text size="xs" c="dimmed">
          {active ? "Following the log as the run writes it" : "End of the log"}
        </Text>
        <SegmentedControl
          size="xs"
          value={String(lines)}
          onChange={(v) => setLines(Number(v))}
          data={["50", "200", "1000"].map((v) => ({ value: v, label: `${v} lines` }))}
          aria-label="Lines of log to show"
        />
      </Group>
      {log.isError ? (
        <ErrorState error={log.error} title="Log unavailable" />
      ) : (
        <ScrollArea
          h={280}
          viewportRef={viewport}
          viewportProps={{ tabIndex: 0, "aria-label": "Log" }}
          onScrollPositionChange={({ y }) => {
            const el = viewport.current;
            if (el) atBottom.current = y + el.clientHeight >= el.scrollHeight - 8;
          }}
          style={{
            background: "var(--mantine-color-dark-8)",
            borderRadius: "var(--mantine-radius-md)",
          }}
          data-testid="log-tail"
        >
          <Code
            block
            tabIndex={0}
            aria-label="Solver log"
            style={{
              background: "transparent",
              color: "var(--mantine-color-gray-3)",
              fontSize: 12,
              whiteSpace: "pre",
            }}
          >
            {log.data === undefined
              ? "Loading…"
              : log.data.length === 0
                ? "No log yet: the solver has not written anything."
                : log.data.join("\n")}
          </Code>
        </ScrollArea>
      )}
    </Box>
  );
}
