import { Badge, Card, Group, SimpleGrid, Skeleton, Text, UnstyledButton } from "@mantine/core";
import { IconCheck } from "@/components/icons";
import { ErrorState, EmptyState } from "@/components/states";
import type { CaseTemplate } from "@/lib/types";
import { useTemplates } from "../hooks/use-catalog";
import classes from "./template-cards.module.css";

export function TemplateCards({
  selected,
  onSelect,
  compact = false,
}: {
  selected?: string | null;
  onSelect: (t: CaseTemplate) => void;
  compact?: boolean;
}) {
  const templates = useTemplates();
  if (templates.isError)
    return <ErrorState error={templates.error} onRetry={() => templates.refetch()} />;
  if (!templates.data)
    return (
      <SimpleGrid cols={{ base: 1, sm: 2, lg: 3 }}>
        {[0, 1, 2].map((i) => (
          <Skeleton key={i} h={compact ? 96 : 150} radius="md" />
        ))}
      </SimpleGrid>
    );
  if (templates.data.length === 0)
    return (
      <EmptyState title="No case templates">
        An operator adds templates under templates/ and syncs the catalog. You can still upload your
        own case.
      </EmptyState>
    );
  return (
    <SimpleGrid
      cols={{ base: 1, sm: 2, lg: 3 }}
      spacing="md"
      role="radiogroup"
      aria-label="Case templates"
    >
      {templates.data.map((t) => {
        const active = selected === t.name;
        return (
          <UnstyledButton
            key={t.name}
            onClick={() => onSelect(t)}
            role="radio"
            aria-checked={active}
            data-testid={`template-${t.name}`}
            className={classes.card}
            data-active={active || undefined}
          >
            <Card withBorder radius="md" padding="md" h="100%" className={classes.inner}>
              <Group justify="space-between" wrap="nowrap" mb={6} align="flex-start">
                <Text fw={600} size="sm">
                  {t.title}
                </Text>
                {active && <IconCheck size={18} color="var(--mantine-primary-color-filled)" />}
              </Group>
              {!compact && (
                <Text size="xs" c="dimmed" lineClamp={3} mb="sm" title={t.description}>
                  {t.description}
                </Text>
              )}
              <Group gap={6} mt="auto">
                <Badge size="xs" variant="light" radius="sm">
                  {t.solver}
                </Badge>
                <Badge size="xs" variant="outline" color="gray" radius="sm">
                  {Object.keys(t.parameters).length} parameters
                </Badge>
              </Group>
            </Card>
          </UnstyledButton>
        );
      })}
    </SimpleGrid>
  );
}
