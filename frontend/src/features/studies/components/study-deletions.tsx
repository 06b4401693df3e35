import { Alert, Progress, Stack, Text } from "@mantine/core";
import { formatInt } from "@/lib/format";
import type { StudyDeletion } from "@/lib/types";

/** Studies being deleted: gone from the list at once, their runs and files removed in the
 * background; each says how far its removal is. Nothing while none is being deleted. */
export function StudyDeletions({ deletions }: { deletions: StudyDeletion[] | undefined }) {
  if (!deletions?.length) return null;
  return (
    <Stack gap="xs" mb="md">
      {deletions.map((d) => {
        const pct = d.runs_total > 0 ? (100 * d.runs_deleted) / d.runs_total : 100;
        return (
          <Alert key={d.id} color="gray" variant="light" title={`Deleting “${d.name}”`}>
            <Text size="sm" data-testid="deletion-progress">
              {formatInt(d.runs_deleted)} of {formatInt(d.runs_total)} runs removed
            </Text>
            <Progress
              value={pct}
              size="sm"
              mt={6}
              aria-label={`${formatInt(d.runs_deleted)} of ${formatInt(d.runs_total)} runs of “${d.name}” removed`}
            />
          </Alert>
        );
      })}
    </Stack>
  );
}
