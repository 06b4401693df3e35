import { Alert, Anchor, Button, Group, Menu } from "@mantine/core";
import { IconDots, IconExternalLink } from "@/components/icons";
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

/** The "Edit" button that opens a row's menu of changes (inside a `Menu`). */
export function EditMenuTarget({ name }: { name: string }) {
  return (
    <Menu.Target>
      <Button
        size="compact-xs"
        variant="default"
        aria-label={`Edit ${name}`}
        rightSection={<IconDots size={12} />}
      >
        Edit
      </Button>
    </Menu.Target>
  );
}
