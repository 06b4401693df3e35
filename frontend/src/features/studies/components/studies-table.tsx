import { Anchor, Badge, Group, Stack, Table, Text } from "@mantine/core";
import { Link } from "react-router";
import { StudyStateBadge } from "@/components/state-badge";
import { formatDateTime, formatRelative } from "@/lib/format";
import type { Study } from "@/lib/types";
import { progressSummary } from "./progress-summary";
import { StudyProgress } from "./study-progress";

export function StudiesTable({
  studies,
  compact = false,
}: {
  studies: Study[];
  compact?: boolean;
}) {
  return (
    <Table.ScrollContainer minWidth={compact ? 480 : 760}>
      <Table verticalSpacing="sm" highlightOnHover aria-label="Studies">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Study</Table.Th>
            <Table.Th w={compact ? 110 : 140}>State</Table.Th>
            <Table.Th w={compact ? 200 : 280}>Progress</Table.Th>
            {!compact && (
              <Table.Th w={90} ta="right">
                Runs
              </Table.Th>
            )}
            <Table.Th w={compact ? 110 : 170}>Created</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {studies.map((s) => (
            <Table.Tr key={s.id} data-testid="study-row">
              <Table.Td>
                <Stack gap={2}>
                  <Anchor component={Link} to={`/studies/${s.id}`} fw={600} size="sm" lineClamp={2}>
                    {s.name}
                  </Anchor>
                  <Group gap={6}>
                    <Badge size="xs" variant="outline" color="gray" radius="sm">
                      {s.template || "uploaded case"}
                    </Badge>
                    <Text size="xs" c="dimmed">
                      {s.solver} · {s.resources.processes}{" "}
                      {s.resources.processes === 1 ? "core" : "cores"}/run
                      {compact ? "" : ` · by ${s.owner}`}
                    </Text>
                  </Group>
                </Stack>
              </Table.Td>
              <Table.Td>
                <StudyStateBadge state={s.state} progress={s.progress} />
              </Table.Td>
              <Table.Td>
                <StudyProgress progress={s.progress} size="sm" showCounts={false} />
                <Text size="xs" c="dimmed" mt={4}>
                  {progressSummary(s.progress, s.run_count)}
                  {s.progress.by_state.running ? ` · ${s.progress.by_state.running} running` : ""}
                  {s.progress.by_state.pending ? ` · ${s.progress.by_state.pending} queued` : ""}
                </Text>
              </Table.Td>
              {!compact && (
                <Table.Td ta="right" ff="monospace">
                  {s.run_count}
                </Table.Td>
              )}
              <Table.Td>
                <Text size="sm" title={formatDateTime(s.created_at)}>
                  {compact ? formatRelative(s.created_at) : formatDateTime(s.created_at)}
                </Text>
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
