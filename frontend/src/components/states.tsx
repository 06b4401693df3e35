import { Alert, Button, Center, Group, Loader, Stack, Text, ThemeIcon, Title } from "@mantine/core";
import { IconAlertTriangle, IconInbox, IconRefresh } from "@/components/icons";
import type { ReactNode } from "react";
import { errorMessage } from "@/lib/api-client";

export function LoadingState({ label = "Loading…", h = 200 }: { label?: string; h?: number }) {
  return (
    <Center h={h} role="status" aria-live="polite">
      <Group gap="xs">
        <Loader size="sm" />
        <Text c="dimmed" size="sm">
          {label}
        </Text>
      </Group>
    </Center>
  );
}

export function ErrorState({
  error,
  title = "Could not load this",
  onRetry,
}: {
  error: unknown;
  title?: string;
  onRetry?: () => void;
}) {
  return (
    <Alert
      color="red"
      variant="light"
      icon={<IconAlertTriangle size={18} />}
      title={title}
      role="alert"
    >
      <Stack gap="xs" align="flex-start">
        <Text size="sm">{errorMessage(error)}</Text>
        {onRetry && (
          <Button
            size="xs"
            variant="default"
            leftSection={<IconRefresh size={14} />}
            onClick={onRetry}
          >
            Try again
          </Button>
        )}
      </Stack>
    </Alert>
  );
}

export function EmptyState({
  title,
  children,
  action,
  icon,
}: {
  title: string;
  children?: ReactNode;
  action?: ReactNode;
  icon?: ReactNode;
}) {
  return (
    <Center py="xl">
      <Stack align="center" gap="xs" maw={420}>
        <ThemeIcon size={44} radius="xl" variant="light" color="gray">
          {icon ?? <IconInbox size={24} />}
        </ThemeIcon>
        <Title order={4} ta="center">
          {title}
        </Title>
        {children && (
          <Text c="dimmed" size="sm" ta="center">
            {children}
          </Text>
        )}
        {action}
      </Stack>
    </Center>
  );
}
