import { Group, Text } from "@mantine/core";
import { IconPlayerPlay } from "@/components/icons";
import { resumedFromLine } from "@/lib/continuation";
import { formatDateTime } from "@/lib/format";
import type { ResumedFrom } from "@/lib/types";

/** Where the run's current attempt went on from, what changed, who asked and when. */
export function ResumedFromNote({ resumed }: { resumed: ResumedFrom }) {
  return (
    <Group gap={6} wrap="nowrap" align="flex-start" mt="sm">
      <IconPlayerPlay size={16} style={{ flexShrink: 0, marginTop: 2 }} aria-hidden />
      <Text size="sm" data-testid="resumed-from">
        {resumedFromLine(resumed)}
        {resumed.at ? `, ${formatDateTime(resumed.at)}` : ""}
      </Text>
    </Group>
  );
}
