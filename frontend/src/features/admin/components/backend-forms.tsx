import {
  Alert,
  Button,
  Group,
  Menu,
  Modal,
  NumberInput,
  Select,
  SimpleGrid,
  Skeleton,
  Stack,
  Switch,
  Text,
  TextInput,
  Textarea,
} from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { notifications } from "@mantine/notifications";
import { useState, type FormEvent } from "react";
import { IconPlus } from "@/components/icons";
import { ConfirmModal } from "@/components/confirm-modal";
import { errorMessage } from "@/lib/api-client";
import type { AdminBackend, BackendAdmin, BackendCheck, BackendKind } from "../api/admin";
import {
  useBackend,
  useCheckBackend,
  useCreateBackend,
  useDeleteBackend,
  useUpdateBackend,
} from "../hooks/use-admin";
import { fieldError } from "../api/field-error";
import { ElasticNodes } from "./elastic-nodes";
import { AdminLink, EditMenuTarget, FormError } from "./form-parts";
import { plural } from "@/lib/format";

const KINDS: { value: BackendKind; label: string }[] = [
  { value: "local", label: "Local machine" },
  { value: "container", label: "Containers" },
  { value: "slurm", label: "Slurm" },
  { value: "openstack", label: "OpenStack" },
  { value: "noop", label: "No-op (benchmarks)" },
];
const FIELDS = [
  "name",
  "kind",
  "cores",
  "memory_gb",
  "max_nodes",
  "enabled",
  "tenants",
  "settings",
  "secrets",
  "stall_seconds",
  "default_wall_seconds",
  "max_wall_seconds",
];

interface BackendForm {
  name: string;
  kind: BackendKind;
  cores: number | string;
  memory_gb: number | string;
  max_nodes: number | string;
  enabled: boolean;
  tenants: string;
  settings: string;
  secrets: string;
  stall_seconds: number | string;
  default_wall_minutes: number | string;
  max_wall_minutes: number | string;
}

const minutesOf = (seconds?: number | null) =>
  seconds === null || seconds === undefined ? "" : Math.round((seconds / 60) * 100) / 100;
/** A number typed in a field, or null when it is left empty (the setting is cleared). */
const numberOrNull = (value: number | string, scale = 1) =>
  value === "" ? null : Math.round(Number(value) * scale);

function formOf(b?: BackendAdmin): BackendForm {
  return {
    name: b?.name ?? "",
    kind: b?.kind ?? "local",
    cores: b?.cores ?? "",
    memory_gb: b?.memory_gb ?? "",
    max_nodes: b?.max_nodes ?? 1,
    enabled: b?.enabled ?? true,
    tenants: (b?.tenants ?? []).join(", "),
    settings: JSON.stringify(b?.settings ?? {}, null, 2),
    secrets: "",
    stall_seconds: b?.stall_seconds ?? "",
    default_wall_minutes: minutesOf(b?.default_wall_seconds),
    max_wall_minutes: minutesOf(b?.max_wall_seconds),
  };
}

/** A JSON object typed into a text area, or the message saying what is wrong with it. */
function parseObject(text: string, what: string): Record<string, unknown> | string {
  if (!text.trim()) return {};
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === "object" && !Array.isArray(value))
      return value as Record<string, unknown>;
    return `${what} must be a JSON object, e.g. {"key": "value"}`;
  } catch (e) {
    return `${what} is not valid JSON: ${(e as Error).message}`;
  }
}

function BackendFormModal({ backend, onClose }: { backend?: BackendAdmin; onClose: () => void }) {
  const editing = !!backend;
  const create = useCreateBackend();
  const update = useUpdateBackend();
  const mutation = editing ? update : create;
  const [form, setForm] = useState<BackendForm>(() => formOf(backend));
  const [local, setLocal] = useState<Record<string, string>>({});
  const set = (patch: Partial<BackendForm>) => setForm((f) => ({ ...f, ...patch }));
  const err = (field: string) => local[field] ?? fieldError(mutation.error, field);

  const submit = (e: FormEvent) => {
    e.preventDefault();
    const settings = parseObject(form.settings, "settings");
    const secrets = parseObject(form.secrets, "secrets");
    const problems: Record<string, string> = {};
    if (typeof settings === "string") problems.settings = settings;
    if (typeof secrets === "string") problems.secrets = secrets;
    setLocal(problems);
    if (Object.keys(problems).length) return;
    const body = {
      settings: settings as Record<string, unknown>,
      ...(Object.keys(secrets).length ? { secrets: secrets as Record<string, unknown> } : {}),
      enabled: form.enabled,
      tenants: form.tenants
        .split(",")
        .map((t) => t.trim())
        .filter(Boolean),
      ...(form.cores !== "" ? { cores: Number(form.cores) } : {}),
      ...(form.memory_gb !== "" ? { memory_gb: Number(form.memory_gb) } : {}),
      ...(form.max_nodes !== "" ? { max_nodes: Number(form.max_nodes) } : {}),
      stall_seconds: numberOrNull(form.stall_seconds),
      default_wall_seconds: numberOrNull(form.default_wall_minutes, 60),
      max_wall_seconds: numberOrNull(form.max_wall_minutes, 60),
    };
    const done = {
      onSuccess: (b: BackendAdmin) => {
        notifications.show({ message: `Backend ${b.name} saved`, color: "teal" });
        onClose();
      },
    };
    if (editing) update.mutate({ name: backend.name, body }, done);
    else create.mutate({ ...body, name: form.name, kind: form.kind }, done);
  };

  return (
    <Modal
      opened
      onClose={onClose}
      title={editing ? `Backend ${backend.name}` : "New backend"}
      size="lg"
    >
      <form onSubmit={submit}>
        <Stack gap="sm">
          <SimpleGrid cols={2}>
            <TextInput
              label="Name"
              required
              disabled={editing}
              value={form.name}
              onChange={(e) => set({ name: e.currentTarget.value })}
              error={err("name")}
            />
            <Select
              label="Kind"
              data={KINDS}
              disabled={editing}
              value={form.kind}
              allowDeselect={false}
              onChange={(v) => v && set({ kind: v as BackendKind })}
              error={err("kind")}
            />
            <NumberInput
              label="Cores"
              description="the portal may use at once"
              min={1}
              value={form.cores}
              onChange={(v) => set({ cores: v })}
              error={err("cores")}
            />
            <NumberInput
              label="Memory (GB)"
              min={0.01}
              value={form.memory_gb}
              onChange={(v) => set({ memory_gb: v })}
              error={err("memory_gb")}
            />
            <NumberInput
              label="Nodes per run"
              min={1}
              value={form.max_nodes}
              onChange={(v) => set({ max_nodes: v })}
              error={err("max_nodes")}
            />
            <TextInput
              label="Tenants"
              description="comma-separated; empty: every tenant"
              value={form.tenants}
              onChange={(e) => set({ tenants: e.currentTarget.value })}
              error={err("tenants")}
            />
          </SimpleGrid>
          <SimpleGrid cols={3}>
            <NumberInput
              label="Stall floor (s)"
              description="a run without progress this long at least is stopped; empty: the portal's"
              min={1}
              value={form.stall_seconds}
              onChange={(v) => set({ stall_seconds: v })}
              error={err("stall_seconds")}
            />
            <NumberInput
              label="Default wall time (min)"
              description="for runs whose study sets none; empty: none"
              min={0.02}
              value={form.default_wall_minutes}
              onChange={(v) => set({ default_wall_minutes: v })}
              error={err("default_wall_seconds")}
            />
            <NumberInput
              label="Wall-time cap (min)"
              description="no run here runs longer; empty: no cap"
              min={0.02}
              value={form.max_wall_minutes}
              onChange={(v) => set({ max_wall_minutes: v })}
              error={err("max_wall_seconds")}
            />
          </SimpleGrid>
          <Switch
            label="Enabled (new runs may start here)"
            checked={form.enabled}
            onChange={(e) => set({ enabled: e.currentTarget.checked })}
          />
          <Textarea
            label="Settings (JSON)"
            description="checked by the backend's driver; see docs/backends/"
            autosize
            minRows={3}
            ff="monospace"
            value={form.settings}
            onChange={(e) => set({ settings: e.currentTarget.value })}
            error={err("settings")}
          />
          <Textarea
            label="Secrets (JSON, write-only)"
            description={
              editing && backend.secrets_set.length
                ? `set: ${backend.secrets_set.join(", ")}; give a key to replace it, null to remove it`
                : 'e.g. {"private_key": "…", "known_hosts": "…"}'
            }
            autosize
            minRows={2}
            ff="monospace"
            value={form.secrets}
            onChange={(e) => set({ secrets: e.currentTarget.value })}
            error={err("secrets")}
          />
          <FormError error={mutation.error} fields={FIELDS} />
          <Group justify="space-between">
            <AdminLink href={backend?.admin_url} />
            <Button type="submit" loading={mutation.isPending}>
              {editing ? "Save" : "Create backend"}
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

function EditBackend({ name, onClose }: { name: string; onClose: () => void }) {
  const backend = useBackend(name);
  if (backend.data) return <BackendFormModal backend={backend.data} onClose={onClose} />;
  return (
    <Modal opened onClose={onClose} title={`Backend ${name}`} size="lg">
      {backend.isError ? <FormError error={backend.error} fields={[]} /> : <Skeleton h={300} />}
    </Modal>
  );
}

export function NewBackendButton() {
  const [opened, modal] = useDisclosure(false);
  return (
    <>
      <Button size="xs" leftSection={<IconPlus size={14} />} onClick={modal.open}>
        New backend
      </Button>
      {opened && <BackendFormModal onClose={modal.close} />}
    </>
  );
}

function describeCheck(report: BackendCheck): string {
  if (!report.ok) return report.error || "the backend did not answer";
  const c = report.capacity;
  return c
    ? `reachable: ${plural(c.cores, "core")}, ${c.memory_gb} GB, ${plural(c.nodes, "node")}${report.capacity_stored ? " (stored as its capacity)" : ""}`
    : "reachable";
}

type Dialog = "edit" | "disable" | "delete" | "elastic" | null;

/** A backend's edits: settings and capacity, check, enable/disable, delete; Django admin. */
export function BackendActions({ backend }: { backend: AdminBackend }) {
  const [dialog, setDialog] = useState<Dialog>(null);
  const check = useCheckBackend();
  const update = useUpdateBackend();
  const del = useDeleteBackend();
  const close = () => {
    update.reset();
    del.reset();
    setDialog(null);
  };
  const runCheck = () =>
    check.mutate(backend.name, {
      onSuccess: (report) =>
        notifications.show({
          title: `Check of ${backend.name}`,
          message: describeCheck(report),
          color: report.ok ? "teal" : "red",
        }),
      onError: (e) =>
        notifications.show({ title: "Check failed", message: errorMessage(e), color: "red" }),
    });
  return (
    <Stack gap={4} align="flex-end">
      <Group gap={6} wrap="nowrap">
        <AdminLink href={backend.admin_url} />
        <Button size="compact-xs" variant="default" loading={check.isPending} onClick={runCheck}>
          Check
        </Button>
        <Menu position="bottom-end" withinPortal>
          <EditMenuTarget name={backend.name} />
          <Menu.Dropdown>
            <Menu.Item onClick={() => setDialog("edit")}>Settings and capacity…</Menu.Item>
            {backend.kind === "slurm" && (
              <Menu.Item onClick={() => setDialog("elastic")}>Elastic nodes…</Menu.Item>
            )}
            {backend.enabled ? (
              <Menu.Item color="red" onClick={() => setDialog("disable")}>
                Disable…
              </Menu.Item>
            ) : (
              <Menu.Item
                onClick={() => update.mutate({ name: backend.name, body: { enabled: true } })}
              >
                Enable
              </Menu.Item>
            )}
            <Menu.Item color="red" onClick={() => setDialog("delete")}>
              Delete…
            </Menu.Item>
          </Menu.Dropdown>
        </Menu>
      </Group>
      {check.data && (
        <Text size="xs" c={check.data.ok ? "teal" : "red"} data-testid="backend-check">
          {describeCheck(check.data)}
        </Text>
      )}
      {dialog === "edit" && <EditBackend name={backend.name} onClose={close} />}
      {dialog === "elastic" && <ElasticNodes name={backend.name} onClose={close} />}
      <ConfirmModal
        opened={dialog === "disable"}
        onClose={close}
        title={`Disable ${backend.name}?`}
        confirmLabel="Disable"
        loading={update.isPending}
        error={update.error}
        onConfirm={() =>
          update.mutate({ name: backend.name, body: { enabled: false } }, { onSuccess: close })
        }
      >
        No new runs start on it; runs already running there go on. Queued runs for it wait until it
        is enabled again.
      </ConfirmModal>
      <ConfirmModal
        opened={dialog === "delete"}
        onClose={close}
        title={`Delete ${backend.name}?`}
        confirmLabel="Delete backend"
        loading={del.isPending}
        error={del.error}
        onConfirm={() => del.mutate(backend.name, { onSuccess: close })}
      >
        Only a backend without studies or runs in its history can be deleted; otherwise disable it
        so their records stay.
      </ConfirmModal>
      {update.error && dialog === null ? (
        <Alert color="red" variant="light" p={4}>
          {errorMessage(update.error)}
        </Alert>
      ) : null}
    </Stack>
  );
}
