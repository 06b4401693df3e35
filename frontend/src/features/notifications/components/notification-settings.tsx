import {
  Alert,
  Badge,
  Button,
  Card,
  Checkbox,
  Code,
  Group,
  Radio,
  Select,
  Stack,
  Switch,
  Table,
  Text,
  TextInput,
  Title,
} from "@mantine/core";
import { useEffect, useState } from "react";
import { CopyIcon } from "@/components/copy-button";
import { ErrorState, LoadingState } from "@/components/states";
import { errorMessage } from "@/lib/api-client";
import { formatDateTime } from "@/lib/format";
import { EVENTS, type Delivery, type NotificationEvent, type Webhook } from "../api/notifications";
import {
  useCreateWebhook,
  useDeleteWebhook,
  useDeliveries,
  useEmailPreference,
  useSaveEmailPreference,
  useTestWebhook,
  useToggleWebhook,
  useWebhooks,
} from "../hooks/use-notifications";

function EventChecks({
  value,
  onChange,
  label,
}: {
  value: NotificationEvent[];
  onChange: (v: NotificationEvent[]) => void;
  label: string;
}) {
  return (
    <Checkbox.Group
      label={label}
      value={value}
      onChange={(v) => onChange(v as NotificationEvent[])}
    >
      <Group mt={4} gap="md">
        {EVENTS.map((e) => (
          <Checkbox key={e.value} value={e.value} label={e.label} />
        ))}
      </Group>
    </Checkbox.Group>
  );
}

function NewWebhook({ isAdmin }: { isAdmin: boolean }) {
  const create = useCreateWebhook();
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<NotificationEvent[]>(["study.completed"]);
  const [scope, setScope] = useState<"personal" | "tenant">("personal");
  const secret = create.data?.secret;
  return (
    <Card withBorder>
      <Stack gap="sm">
        <Title order={4}>Add a webhook</Title>
        <TextInput
          label="URL"
          placeholder="https://hooks.example.org/windtunnel"
          value={url}
          onChange={(e) => setUrl(e.currentTarget.value)}
        />
        <EventChecks label="Events" value={events} onChange={setEvents} />
        {isAdmin && (
          <Select
            label="For"
            data={[
              { value: "personal", label: "The studies I own" },
              { value: "tenant", label: "Every study of the tenant" },
            ]}
            value={scope}
            onChange={(v) => setScope(v === "tenant" ? "tenant" : "personal")}
            allowDeselect={false}
          />
        )}
        {create.isError && (
          <Alert color="red" role="alert">
            {errorMessage(create.error)}
          </Alert>
        )}
        {secret && (
          <Alert color="green" title="Webhook added: copy its signing secret now">
            <Text size="sm">
              It is shown this once. Your receiver checks Windtunnel-Signature with it.
            </Text>
            <Group gap="xs" mt={6}>
              <Code data-testid="webhook-secret">{secret}</Code>
              <CopyIcon value={secret} label="Copy the secret" />
            </Group>
          </Alert>
        )}
        <Group>
          <Button
            loading={create.isPending}
            onClick={() => create.mutate({ url, events, scope }, { onSuccess: () => setUrl("") })}
          >
            Add webhook
          </Button>
        </Group>
      </Stack>
    </Card>
  );
}

function DeliveryLog({ webhookId }: { webhookId: string }) {
  const log = useDeliveries(webhookId);
  if (log.isPending) return <LoadingState label="Loading deliveries…" h={80} />;
  if (log.isError) return <ErrorState error={log.error} onRetry={() => log.refetch()} />;
  if (log.data.length === 0)
    return (
      <Text size="sm" c="dimmed">
        Nothing sent yet.
      </Text>
    );
  return (
    <Table striped withTableBorder fz="sm" data-testid="delivery-log">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>When</Table.Th>
          <Table.Th>Event</Table.Th>
          <Table.Th>Attempt</Table.Th>
          <Table.Th>Status</Table.Th>
          <Table.Th>Error, duration</Table.Th>
          <Table.Th>Next retry</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {log.data.flatMap((d: Delivery) =>
          d.attempts_log.map((a) => (
            <Table.Tr key={`${d.id}-${a.number}`}>
              <Table.Td>{formatDateTime(a.created_at)}</Table.Td>
              <Table.Td>{d.event_type}</Table.Td>
              <Table.Td>
                {a.number}/{d.max_attempts}
              </Table.Td>
              <Table.Td>
                <Badge
                  color={a.status_code && a.status_code < 300 ? "green" : "red"}
                  variant="light"
                >
                  {a.status_code ?? "no answer"}
                </Badge>
              </Table.Td>
              <Table.Td>
                <Text size="xs" lineClamp={2}>
                  {a.error ? `${a.error} (${a.duration_ms} ms)` : `${a.duration_ms} ms`}
                </Text>
              </Table.Td>
              <Table.Td>{a.next_retry_at ? formatDateTime(a.next_retry_at) : "—"}</Table.Td>
            </Table.Tr>
          )),
        )}
      </Table.Tbody>
    </Table>
  );
}

function WebhookCard({ webhook }: { webhook: Webhook }) {
  const test = useTestWebhook();
  const toggle = useToggleWebhook();
  const remove = useDeleteWebhook();
  const [showLog, setShowLog] = useState(false);
  const attempt = test.data?.attempts_log[0];
  return (
    <Card withBorder data-testid="webhook">
      <Stack gap="xs">
        <Group justify="space-between" wrap="nowrap">
          <Stack gap={0}>
            <Text fw={600} style={{ wordBreak: "break-all" }}>
              {webhook.url}
            </Text>
            <Text size="xs" c="dimmed">
              {webhook.scope === "tenant" ? "every study of the tenant" : "studies you own"} ·
              secret {webhook.secret_prefix}… · {webhook.events.join(", ")}
            </Text>
          </Stack>
          <Switch
            label="Active"
            checked={webhook.active}
            onChange={(e) => toggle.mutate({ id: webhook.id, active: e.currentTarget.checked })}
          />
        </Group>
        {webhook.disabled_reason && <Alert color="yellow">{webhook.disabled_reason}</Alert>}
        <Group gap="xs">
          <Button
            size="xs"
            variant="light"
            loading={test.isPending}
            onClick={() => test.mutate(webhook.id)}
          >
            Send test
          </Button>
          <Button size="xs" variant="default" onClick={() => setShowLog((v) => !v)}>
            {showLog ? "Hide deliveries" : "Deliveries"}
          </Button>
          <Button size="xs" color="red" variant="subtle" onClick={() => remove.mutate(webhook.id)}>
            Delete
          </Button>
        </Group>
        {test.isError && <Alert color="red">{errorMessage(test.error)}</Alert>}
        {attempt && (
          <Alert
            color={test.data?.state === "delivered" ? "green" : "red"}
            data-testid="test-result"
          >
            {test.data?.state === "delivered"
              ? `Delivered: the receiver answered ${attempt.status_code} in ${attempt.duration_ms} ms.`
              : `Not delivered: ${attempt.error || `the receiver answered ${attempt.status_code}`}.`}
          </Alert>
        )}
        {showLog && <DeliveryLog webhookId={webhook.id} />}
      </Stack>
    </Card>
  );
}

function EmailSettings() {
  const pref = useEmailPreference();
  const save = useSaveEmailPreference();
  const [events, setEvents] = useState<NotificationEvent[]>([]);
  const [scope, setScope] = useState<"own" | "tenant">("own");
  const [email, setEmail] = useState("");
  useEffect(() => {
    if (!pref.data) return;
    setEvents(pref.data.events);
    setScope(pref.data.scope);
    setEmail(pref.data.email);
  }, [pref.data]);
  if (pref.isPending) return <LoadingState label="Loading…" h={80} />;
  if (pref.isError) return <ErrorState error={pref.error} onRetry={() => pref.refetch()} />;
  return (
    <Card withBorder>
      <Stack gap="sm">
        <Title order={4}>E-mail</Title>
        <TextInput
          label="Address"
          value={email}
          onChange={(e) => setEmail(e.currentTarget.value)}
        />
        <EventChecks label="E-mail me about" value={events} onChange={setEvents} />
        <Radio.Group
          label="For"
          value={scope}
          onChange={(v) => setScope(v === "tenant" ? "tenant" : "own")}
        >
          <Group mt={4}>
            <Radio value="own" label="The studies I own" />
            <Radio value="tenant" label="Every study of my tenant" />
          </Group>
        </Radio.Group>
        {save.isError && (
          <Alert color="red" role="alert">
            {errorMessage(save.error)}
          </Alert>
        )}
        {save.isSuccess && (
          <Text size="sm" c="green">
            Saved.
          </Text>
        )}
        <Group>
          <Button
            loading={save.isPending}
            onClick={() => save.mutate({ events, scope, ...(email ? { email } : {}) })}
          >
            Save e-mail settings
          </Button>
        </Group>
      </Stack>
    </Card>
  );
}

/** Settings → Notifications: webhooks (with the delivery log and a test) and e-mail. */
export function NotificationSettings({ isAdmin }: { isAdmin: boolean }) {
  const hooks = useWebhooks();
  return (
    <Stack gap="lg">
      <Stack gap="sm">
        <Title order={3}>Webhooks</Title>
        <Text size="sm" c="dimmed">
          Signed HTTP requests when studies end or runs fail; see docs/notifications.md for the
          payload and how to check the signature.
        </Text>
        {hooks.isPending && <LoadingState label="Loading webhooks…" h={80} />}
        {hooks.isError && <ErrorState error={hooks.error} onRetry={() => hooks.refetch()} />}
        {hooks.data?.map((w) => (
          <WebhookCard key={w.id} webhook={w} />
        ))}
        {hooks.data?.length === 0 && (
          <Text size="sm" c="dimmed">
            No webhooks yet.
          </Text>
        )}
        <NewWebhook isAdmin={isAdmin} />
      </Stack>
      <EmailSettings />
    </Stack>
  );
}
