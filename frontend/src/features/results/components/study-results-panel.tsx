import { Button, Card, Grid, Group, Text, Title } from "@mantine/core";
import { Link } from "react-router";
import { useCompletedRuns } from "../hooks/use-results";
import { COMPARE_MAX, COMPARE_MIN, compareHref } from "../lib/field-traces";
import { FieldCompare, type FieldRun } from "./field-compare";
import { ObjectivePolar } from "./objective-polar";

/**
 * The study page's comparisons: one objective against another over the completed runs, and
 * the selected runs' fields side by side, with a link to the compare view.
 */
export function StudyResultsPanel({
  studyId,
  parameters,
  objectives,
  selected,
  active,
  onRunClick,
}: {
  studyId: string;
  parameters: string[];
  objectives: string[];
  selected: FieldRun[];
  active: boolean;
  onRunClick?: (runId: string) => void;
}) {
  const completed = useCompletedRuns(studyId, { active });
  const href = compareHref(selected.map((r) => r.id));
  return (
    <Grid gutter="lg" data-testid="study-results">
      {objectives.length >= 2 && (
        <Grid.Col span={{ base: 12, xl: 5 }}>
          <Card padding="md" h="100%">
            <Title order={3} mb="sm">
              Objective against objective
            </Title>
            <ObjectivePolar
              runs={completed.data ?? []}
              objectives={objectives}
              parameters={parameters}
              onRunClick={onRunClick}
            />
          </Card>
        </Grid.Col>
      )}
      <Grid.Col span={{ base: 12, xl: objectives.length >= 2 ? 7 : 12 }}>
        <Card padding="md" h="100%">
          <Group justify="space-between" mb="sm">
            <Title order={3}>Fields side by side</Title>
            {href ? (
              <Button
                size="xs"
                variant="default"
                component={Link}
                to={href}
                data-testid="compare-selected"
              >
                Compare {selected.length} selected
              </Button>
            ) : (
              // a real disabled button (a link cannot be disabled: it would be read, and
              // measured for contrast, as a live one)
              <Button size="xs" variant="default" disabled data-testid="compare-selected">
                Compare {selected.length || ""} selected
              </Button>
            )}
          </Group>
          {selected.length === 0 ? (
            <Text size="sm" c="dimmed">
              Tick runs in the table below to see their flow fields side by side on one colour
              scale, or {COMPARE_MIN}–{COMPARE_MAX} of them to open the compare view.
            </Text>
          ) : (
            <FieldCompare runs={selected.slice(0, COMPARE_MAX)} />
          )}
        </Card>
      </Grid.Col>
    </Grid>
  );
}
