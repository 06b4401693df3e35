import { Alert, Button, Group, Modal, Stack, Text } from "@mantine/core";
import type { ReactNode } from "react";
import { errorMessage } from "@/lib/api-client";

/** Asks before a destructive action; shows the API's refusal if it comes. */
export function ConfirmModal({
  opened,
  onClose,
  title,
  children,
  confirmLabel,
  keepLabel = "Keep it",
  onConfirm,
  loading,
  error,
  color = "red",
  confirmTestId,
}: {
  opened: boolean;
  onClose: () => void;
  title: string;
  /** what the action does, in a sentence or two */
  children: ReactNode;
  confirmLabel: string;
  keepLabel?: string;
  onConfirm: () => void;
  loading?: boolean;
  error?: unknown;
  color?: string;
  confirmTestId?: string;
}) {
  return (
    <Modal opened={opened} onClose={onClose} title={title} centered>
      <Stack gap="md">
        <Text size="sm" component="div">
          {children}
        </Text>
        {error ? (
          <Alert color="red" variant="light" role="alert" data-testid="confirm-error">
            {errorMessage(error)}
          </Alert>
        ) : null}
        <Group justify="flex-end">
          <Button variant="default" onClick={onClose}>
            {keepLabel}
          </Button>
          <Button color={color} loading={loading} onClick={onConfirm} data-testid={confirmTestId}>
            {confirmLabel}
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}
