import { Alert, Anchor, Button, Group, Modal, Stack, Text } from "@mantine/core";
import type { ReactNode } from "react";
import { IconExternalLink } from "@/components/icons";
import { errorMessage } from "@/lib/api-client";
import { fieldError } from "../api/field-error";

/** The error of a form when no field of it shows it (a 409, a 403, an unknown field). */
export function FormError({ error, fields }: { error: unknown; fields: readonly string[] }) {
  if (!error) return null;
  if (fields.some((f) => fieldError(error, f))) return null;
  return (
    <Alert color="red" variant="light" title="Not saved" data-testid="form-error">
      {errorMessage(error)}
    </Alert>
  );
}

/** A link to the object's change form in the Django admin (a new tab). */
export function AdminLink({
  href,
  label = "Django admin",
}: {
  href?: string | null;
  label?: string;
}) {
  if (!href) return null;
  return (
    <Anchor href={href} target="_blank" rel="noreferrer" size="xs" data-testid="admin-link">
      <Group gap={2} component="span" wrap="nowrap">
        {label} <IconExternalLink size={12} />
      </Group>
    </Anchor>
  );
}

/** Asks before a destructive action; shows the API's refusal if it comes. */
export function ConfirmModal({
  opened,
  onClose,
  title,
  children,
  confirmLabel,
  onConfirm,
  loading,
  error,
  color = "red",
}: {
  opened: boolean;
  onClose: () => void;
  title: string;
  children: ReactNode;
  confirmLabel: string;
  onConfirm: () => void;
  loading?: boolean;
  error?: unknown;
  color?: string;
}) {
  return (
    <Modal opened={opened} onClose={onClose} title={title} centered>
      <Stack gap="md">
        <Text size="sm" component="div">
          {children}
        </Text>
        {error ? (
          <Alert color="red" variant="light" data-testid="confirm-error">
            {errorMessage(error)}
          </Alert>
        ) : null}
        <Group justify="flex-end">
          <Button variant="default" onClick={onClose}>
            Keep it
          </Button>
          <Button color={color} loading={loading} onClick={onConfirm}>
            {confirmLabel}
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}
