import {
  Alert,
  Badge,
  Button,
  Card,
  Code,
  Group,
  SegmentedControl,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { IconAlertTriangle, IconPlus, IconTrash } from "@/components/icons";
import { ConfirmModal } from "@/components/confirm-modal";
import { CopyTextButton } from "@/components/copy-button";
import { EmptyState, ErrorState, LoadingState } from "@/components/states";
import { ApiError, errorMessage } from "@/lib/api-client";
import { formatDateTime, formatRelative } from "@/lib/format";
import { useState, type FormEvent } from "react";
import type { ApiToken, NewApiToken } from "../api/tokens";
import { useCreateToken, useRevokeToken, useTokens } from "../hooks/use-tokens";

/** The expiries the form offers (the API takes 1 to 365 days, or none). */
const EXPIRY_CHOICES = [
  { value: "7", label: "7 days" },
  { value: "30", label: "30 days" },
  { value: "90", label: "90 days" },
  { value: "365", label: "1 year" },
  { value: "never", label: "Never" },
];
const NAME_MAX = 100;

/** The signed-in user's API tokens: made (the key shown once), listed, revoked. */
export function ApiTokens() {
  const tokens = useTokens();
  const [made, setMade] = useState<NewApiToken | null>(null);
  const [revoking, setRevoking] = useState<ApiToken | null>(null);

  return (
    <Stack gap="lg">
      {made ? (
        <NewKey token={made} onDone={() => setMade(null)} />
      ) : (
        <CreateForm onMade={setMade} />
      )}
      <Card withBorder padding="lg">
        <Title order={4} mb="sm">
          Your tokens
        </Title>
        {tokens.isPending ? (
          <LoadingState label="Loading your tokens…" h={120} />
        ) : tokens.isError ? (
          <ErrorState error={tokens.error} onRetry={() => tokens.refetch()} />
        ) : tokens.data.length === 0 ? (
          <EmptyState title="No API tokens yet">
            Make one above for a script, the windtunnel command or a copied curl command.
          </EmptyState>
        ) : (
          <TokensTable tokens={tokens.data} onRevoke={setRevoking} />
        )}
      </Card>
      <RevokeModal token={revoking} onClose={() => setRevoking(null)} />
    </Stack>
  );
}

function CreateForm({ onMade }: { onMade: (token: NewApiToken) => void }) {
  const create = useCreateToken();
  const [name, setName] = useState("");
  const [expiry, setExpiry] = useState<string>("90");
  const [nameError, setNameError] = useState<string | null>(null);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const trimmed = name.trim();
    if (!trimmed) return setNameError("Give the token a name, e.g. laptop or ci");
    if (trimmed.length > NAME_MAX) return setNameError(`At most ${NAME_MAX} characters`);
    setNameError(null);
    create.mutate(
      { name: trimmed, expires_in_days: expiry === "never" ? null : Number(expiry) },
      {
        onSuccess: (token) => {
          setName("");
          onMade(token);
        },
        onError: (e) => {
          if (e instanceof ApiError && e.field === "name") setNameError(e.message);
        },
      },
    );
  };
  const otherError =
    create.error && !(create.error instanceof ApiError && create.error.field === "name")
      ? create.error
      : null;

  return (
    <Card withBorder padding="lg" component="form" onSubmit={submit} noValidate>
      <Title order={4} mb={4}>
        New token
      </Title>
      <Text size="sm" c="dimmed" mb="md">
        Scripts send it as <Code>Authorization: Token …</Code>; the windtunnel command and the
        copied curl commands read it from <Code>WINDTUNNEL_TOKEN</Code>.
      </Text>
      <Group align="flex-start" gap="sm" wrap="wrap">
        <TextInput
          label="Name"
          placeholder="e.g. laptop, ci"
          value={name}
          onChange={(e) => setName(e.currentTarget.value)}
          error={nameError}
          maxLength={NAME_MAX + 1}
          required
          w={280}
        />
        <Stack gap={4}>
          <Text size="sm" fw={500} id="token-expiry-label">
            Expires after
          </Text>
          <SegmentedControl
            data={EXPIRY_CHOICES}
            value={expiry}
            onChange={setExpiry}
            aria-labelledby="token-expiry-label"
          />
        </Stack>
        <Button
          type="submit"
          mt={25}
          leftSection={<IconPlus size={14} />}
          loading={create.isPending}
        >
          Create token
        </Button>
      </Group>
      {otherError && (
        <Alert color="red" variant="light" mt="md" role="alert">
          {errorMessage(otherError)}
        </Alert>
      )}
    </Card>
  );
}

function NewKey({ token, onDone }: { token: NewApiToken; onDone: () => void }) {
  return (
    <Alert
      color="yellow"
      variant="light"
      icon={<IconAlertTriangle size={18} />}
      title={`Your new token “${token.name}”: copy it now`}
      data-testid="new-token"
    >
      <Stack gap="sm">
        <Text size="sm">
          This is the only time the portal shows this key: it keeps only a fingerprint of it. Store
          it where your scripts read it (e.g. <Code>export WINDTUNNEL_TOKEN=…</Code>) and treat it
          like a password.
        </Text>
        <Code block data-testid="new-token-key" style={{ wordBreak: "break-all" }}>
          {token.key}
        </Code>
        <Group gap="xs">
          <CopyTextButton value={token.key} label="Copy token" />
          <Button size="xs" variant="subtle" onClick={onDone}>
            I have copied it
          </Button>
        </Group>
      </Stack>
    </Alert>
  );
}

function TokensTable({
  tokens,
  onRevoke,
}: {
  tokens: ApiToken[];
  onRevoke: (token: ApiToken) => void;
}) {
  return (
    <Table.ScrollContainer minWidth={640}>
      <Table verticalSpacing="xs" data-testid="tokens-table">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Name</Table.Th>
            <Table.Th>Key</Table.Th>
            <Table.Th>Created</Table.Th>
            <Table.Th>Last used</Table.Th>
            <Table.Th>Expires</Table.Th>
            <Table.Th />
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {tokens.map((t) => (
            <Table.Tr key={t.id}>
              <Table.Td style={{ overflowWrap: "anywhere" }}>{t.name}</Table.Td>
              <Table.Td>
                <Code>{t.prefix}…</Code>
              </Table.Td>
              <Table.Td>{formatDateTime(t.created_at)}</Table.Td>
              <Table.Td title={t.last_used_at ? formatDateTime(t.last_used_at) : undefined}>
                {t.last_used_at ? formatRelative(t.last_used_at) : "never"}
              </Table.Td>
              <Table.Td>
                {t.expired ? (
                  <Badge color="red" variant="light">
                    expired {formatDateTime(t.expires_at)}
                  </Badge>
                ) : t.expires_at ? (
                  formatDateTime(t.expires_at)
                ) : (
                  "never"
                )}
              </Table.Td>
              <Table.Td ta="right">
                <Button
                  size="xs"
                  variant="subtle"
                  color="red"
                  leftSection={<IconTrash size={14} />}
                  onClick={() => onRevoke(t)}
                  aria-label={`Revoke ${t.name}`}
                >
                  Revoke
                </Button>
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

function RevokeModal({ token, onClose }: { token: ApiToken | null; onClose: () => void }) {
  const revoke = useRevokeToken();
  const close = () => {
    revoke.reset();
    onClose();
  };
  return (
    <ConfirmModal
      opened={token !== null}
      onClose={close}
      title="Revoke this token?"
      confirmLabel="Revoke token"
      loading={revoke.isPending}
      error={revoke.error}
      onConfirm={() =>
        token &&
        revoke.mutate(token.id, {
          onSuccess: () => {
            notifications.show({ message: `Token ${token.name} revoked`, color: "teal" });
            close();
          },
        })
      }
    >
      {token && (
        <>
          Scripts and commands using <b>{token.name}</b> (<Code>{token.prefix}…</Code>) stop working
          at once. This cannot be undone.
        </>
      )}
    </ConfirmModal>
  );
}
