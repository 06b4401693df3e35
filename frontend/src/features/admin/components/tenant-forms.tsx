import {
  Alert,
  Badge,
  Button,
  Group,
  Menu,
  Modal,
  NumberInput,
  Select,
  SimpleGrid,
  Skeleton,
  Stack,
  Table,
  Text,
  TextInput,
} from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { notifications } from "@mantine/notifications";
import { useEffect, useState, type FormEvent } from "react";
import { IconPlus } from "@/components/icons";
import type { AdminTenant, Member, QuotaInput, Role } from "../api/admin";
import {
  useAddMember,
  useCreateTenant,
  useMembers,
  useRemoveMember,
  useSetMemberRole,
  useTenantQuota,
  useUpdateQuota,
  useUpdateTenant,
} from "../hooks/use-admin";
import { fieldError } from "../api/field-error";
import { ConfirmModal } from "@/components/confirm-modal";
import { AdminLink, EditMenuTarget, FormError } from "./form-parts";

/** Said next to every quota form; the API answers the same words in `note`. */
export const QUOTA_APPLIES =
  "A quota applies to admission from now on: runs already admitted or running keep what they hold, even when the new quota is below it; queued runs start as they fit the new quota.";

type QuotaKey = keyof QuotaInput;
const QUOTA_FIELDS: { key: QuotaKey; label: string; description: string; step?: number }[] = [
  { key: "cores", label: "Cores", description: "held at once by running runs" },
  { key: "memory_gb", label: "Memory (GB)", description: "held at once", step: 0.5 },
  { key: "max_nodes", label: "Nodes", description: "nodes or instances held at once" },
  { key: "max_runs", label: "Concurrent runs", description: "running at once" },
  {
    key: "max_queued_runs",
    label: "Queued or running runs",
    description: "a submission past it is refused",
  },
  {
    key: "storage_gb",
    label: "Storage (GB)",
    description:
      "uploads, result archives and run directories; when used up, nothing new is submitted or started",
  },
  {
    key: "core_hours_budget",
    label: "Core-hour budget",
    description: "per calendar month (UTC); empty: no budget",
  },
];
const QUOTA_KEYS = QUOTA_FIELDS.map((f) => f.key);

type QuotaForm = Partial<Record<QuotaKey, number | string>>;

/** The form's values as the API takes them: numbers, the budget null when empty. */
function quotaBody(values: QuotaForm, initial?: QuotaForm): QuotaInput {
  const body: Record<string, number | null> = {};
  for (const key of QUOTA_KEYS) {
    const value = values[key];
    if (initial && value === initial[key]) continue;
    if (value === "" || value === undefined) {
      if (key === "core_hours_budget") body[key] = null;
      continue;
    }
    body[key] = Number(value);
  }
  return body as QuotaInput;
}

function QuotaInputs({
  values,
  onChange,
  error,
  prefix = "",
}: {
  values: QuotaForm;
  onChange: (v: QuotaForm) => void;
  error: unknown;
  prefix?: string;
}) {
  return (
    <SimpleGrid cols={{ base: 1, sm: 2 }}>
      {QUOTA_FIELDS.map((f) => (
        <NumberInput
          key={f.key}
          label={f.label}
          description={f.description}
          min={0}
          step={f.step ?? 1}
          allowDecimal={f.key.endsWith("_gb") || f.key === "core_hours_budget"}
          value={values[f.key] ?? ""}
          onChange={(v) => onChange({ ...values, [f.key]: v })}
          error={fieldError(error, `${prefix}${f.key}`)}
        />
      ))}
    </SimpleGrid>
  );
}

export function NewTenantButton() {
  const [opened, modal] = useDisclosure(false);
  const create = useCreateTenant();
  const [name, setName] = useState("");
  const [displayName, setDisplayName] = useState("");
  const [quota, setQuota] = useState<QuotaForm>({});

  const submit = (e: FormEvent) => {
    e.preventDefault();
    const limits = quotaBody(quota);
    if (limits.core_hours_budget === null) delete limits.core_hours_budget;
    create.mutate(
      { name, display_name: displayName, quota: limits },
      {
        onSuccess: (t) => {
          notifications.show({ message: `Tenant ${t.name} created`, color: "teal" });
          modal.close();
          setName("");
          setDisplayName("");
          setQuota({});
          create.reset();
        },
      },
    );
  };
  return (
    <>
      <Button size="xs" leftSection={<IconPlus size={14} />} onClick={modal.open}>
        New tenant
      </Button>
      <Modal opened={opened} onClose={modal.close} title="New tenant" size="lg">
        <form onSubmit={submit}>
          <Stack gap="sm">
            <TextInput
              label="Name"
              description="letters, digits, - and _; used in the API"
              required
              value={name}
              onChange={(e) => setName(e.currentTarget.value)}
              error={fieldError(create.error, "name")}
            />
            <TextInput
              label="Display name"
              value={displayName}
              onChange={(e) => setDisplayName(e.currentTarget.value)}
              error={fieldError(create.error, "display_name")}
            />
            <Text size="sm" fw={600}>
              Quota (leave a field empty for its default)
            </Text>
            <QuotaInputs values={quota} onChange={setQuota} error={create.error} prefix="quota." />
            <FormError
              error={create.error}
              fields={["name", "display_name", ...QUOTA_KEYS.map((k) => `quota.${k}`)]}
            />
            <Group justify="flex-end">
              <Button type="submit" loading={create.isPending}>
                Create tenant
              </Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  );
}

function RenameModal({ tenant, onClose }: { tenant: AdminTenant; onClose: () => void }) {
  const update = useUpdateTenant();
  const [name, setName] = useState(tenant.name);
  const [displayName, setDisplayName] = useState(tenant.display_name);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    update.mutate(
      { name: tenant.name, body: { name, display_name: displayName } },
      {
        onSuccess: () => {
          notifications.show({ message: `Tenant ${name} saved`, color: "teal" });
          onClose();
        },
      },
    );
  };
  return (
    <Modal opened onClose={onClose} title={`Rename ${tenant.name}`}>
      <form onSubmit={submit}>
        <Stack gap="sm">
          <TextInput
            label="Name"
            required
            value={name}
            onChange={(e) => setName(e.currentTarget.value)}
            error={fieldError(update.error, "name")}
          />
          <TextInput
            label="Display name"
            value={displayName}
            onChange={(e) => setDisplayName(e.currentTarget.value)}
            error={fieldError(update.error, "display_name")}
          />
          <FormError error={update.error} fields={["name", "display_name"]} />
          <Group justify="flex-end">
            <Button type="submit" loading={update.isPending}>
              Save
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

export function QuotaModal({ tenant, onClose }: { tenant: AdminTenant; onClose: () => void }) {
  const quota = useTenantQuota(tenant.name);
  const update = useUpdateQuota();
  const [values, setValues] = useState<QuotaForm | null>(null);
  const initial = quota.data?.quota as QuotaForm | undefined;
  useEffect(() => {
    if (initial && values === null) {
      const loaded: QuotaForm = {};
      for (const key of QUOTA_KEYS) loaded[key] = (initial[key] as number | null) ?? "";
      setValues(loaded);
    }
  }, [initial, values]);

  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!values) return;
    update.mutate(
      { name: tenant.name, body: quotaBody(values) },
      {
        onSuccess: (answer) => {
          notifications.show({
            title: `Quota of ${tenant.name} saved`,
            message: answer.over.length
              ? `${answer.note} Running runs are over the new ${answer.over.join(", ")} now; they go on.`
              : answer.note,
            color: "teal",
          });
          onClose();
        },
      },
    );
  };
  return (
    <Modal opened onClose={onClose} title={`Quota of ${tenant.name}`} size="lg">
      <form onSubmit={submit}>
        <Stack gap="sm">
          <Alert color="blue" variant="light" data-testid="quota-applies">
            {quota.data?.note ?? QUOTA_APPLIES}
          </Alert>
          {values ? (
            <QuotaInputs values={values} onChange={setValues} error={update.error} />
          ) : quota.isError ? (
            <FormError error={quota.error} fields={[]} />
          ) : (
            <Skeleton h={240} />
          )}
          <FormError error={update.error} fields={QUOTA_KEYS} />
          <Group justify="space-between">
            <AdminLink href={quota.data?.admin_url} label="Quota in the Django admin" />
            <Button type="submit" loading={update.isPending} disabled={!values}>
              Save quota
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

const ROLES: { value: Role; label: string }[] = [
  { value: "member", label: "Member" },
  { value: "admin", label: "Admin" },
];

function MemberRow({ tenant, member }: { tenant: string; member: Member }) {
  const setRole = useSetMemberRole();
  const remove = useRemoveMember();
  const [confirm, confirmModal] = useDisclosure(false);
  const error = setRole.error;
  return (
    <Table.Tr data-testid={`member-${member.username}`}>
      <Table.Td>
        <Text size="sm" fw={600}>
          {member.username}
        </Text>
        <Text size="xs" c="dimmed">
          {member.email || "no e-mail"}
        </Text>
      </Table.Td>
      <Table.Td>
        <Select
          size="xs"
          w={120}
          data={ROLES}
          value={member.role}
          aria-label={`Role of ${member.username}`}
          allowDeselect={false}
          onChange={(v) =>
            v &&
            v !== member.role &&
            setRole.mutate({ name: tenant, userId: member.user_id, role: v as Role })
          }
          error={error ? fieldError(error, "role") || (error as Error).message : undefined}
        />
      </Table.Td>
      <Table.Td>
        <Group gap="xs" wrap="nowrap">
          <AdminLink href={member.user_admin_url} label="User" />
          <Button size="compact-xs" color="red" variant="subtle" onClick={confirmModal.open}>
            Remove
          </Button>
        </Group>
        <ConfirmModal
          opened={confirm}
          onClose={() => {
            remove.reset();
            confirmModal.close();
          }}
          title={`Remove ${member.username}?`}
          confirmLabel="Remove member"
          loading={remove.isPending}
          error={remove.error}
          onConfirm={() =>
            remove.mutate(
              { name: tenant, userId: member.user_id },
              {
                onSuccess: () => {
                  notifications.show({ message: `${member.username} removed`, color: "teal" });
                  confirmModal.close();
                },
              },
            )
          }
        >
          {member.username} loses access to {tenant}: its studies and runs stay, owned by the
          tenant.
        </ConfirmModal>
      </Table.Td>
    </Table.Tr>
  );
}

export function MembersModal({ tenant, onClose }: { tenant: AdminTenant; onClose: () => void }) {
  const members = useMembers(tenant.name);
  const add = useAddMember();
  const [user, setUser] = useState("");
  const [role, setRole] = useState<Role>("member");
  const submit = (e: FormEvent) => {
    e.preventDefault();
    add.mutate(
      { name: tenant.name, user, role },
      {
        onSuccess: (m) => {
          notifications.show({ message: `${m.username} added as ${m.role}`, color: "teal" });
          setUser("");
          add.reset();
        },
      },
    );
  };
  return (
    <Modal opened onClose={onClose} title={`Members of ${tenant.name}`} size="lg">
      <Stack gap="md">
        {members.data ? (
          <Table verticalSpacing="xs" aria-label="Members">
            <Table.Tbody>
              {members.data.map((m) => (
                <MemberRow key={m.user_id} tenant={tenant.name} member={m} />
              ))}
            </Table.Tbody>
          </Table>
        ) : members.isError ? (
          <FormError error={members.error} fields={[]} />
        ) : (
          <Skeleton h={80} />
        )}
        <form onSubmit={submit}>
          <Group align="flex-start" gap="xs">
            <TextInput
              label="Add a user"
              placeholder="username or e-mail"
              required
              style={{ flex: 1 }}
              value={user}
              onChange={(e) => setUser(e.currentTarget.value)}
              error={fieldError(add.error, "user")}
            />
            <Select
              label="Role"
              w={120}
              data={ROLES}
              value={role}
              allowDeselect={false}
              onChange={(v) => v && setRole(v as Role)}
              error={fieldError(add.error, "role")}
            />
            <Button type="submit" mt={25} loading={add.isPending}>
              Add
            </Button>
          </Group>
          <FormError error={add.error} fields={["user", "role"]} />
        </form>
      </Stack>
    </Modal>
  );
}

type Dialog = "rename" | "quota" | "members" | "active" | null;

/** A tenant's edits: rename, quota, members, deactivate or activate; its Django admin form. */
export function TenantActions({ tenant }: { tenant: AdminTenant }) {
  const [dialog, setDialog] = useState<Dialog>(null);
  const update = useUpdateTenant();
  const close = () => {
    update.reset();
    setDialog(null);
  };
  return (
    <Group gap={6} wrap="nowrap" justify="flex-end">
      <AdminLink href={tenant.admin_url} />
      <Menu position="bottom-end" withinPortal>
        <EditMenuTarget name={tenant.name} />
        <Menu.Dropdown>
          <Menu.Item onClick={() => setDialog("quota")}>Quota…</Menu.Item>
          <Menu.Item onClick={() => setDialog("members")}>Members…</Menu.Item>
          <Menu.Item onClick={() => setDialog("rename")}>Rename…</Menu.Item>
          <Menu.Divider />
          <Menu.Item color={tenant.active ? "red" : undefined} onClick={() => setDialog("active")}>
            {tenant.active ? "Deactivate…" : "Activate…"}
          </Menu.Item>
        </Menu.Dropdown>
      </Menu>
      {dialog === "rename" && <RenameModal tenant={tenant} onClose={close} />}
      {dialog === "quota" && <QuotaModal tenant={tenant} onClose={close} />}
      {dialog === "members" && <MembersModal tenant={tenant} onClose={close} />}
      <ConfirmModal
        opened={dialog === "active"}
        onClose={close}
        title={`${tenant.active ? "Deactivate" : "Activate"} ${tenant.name}?`}
        confirmLabel={tenant.active ? "Deactivate" : "Activate"}
        color={tenant.active ? "red" : "teal"}
        loading={update.isPending}
        error={update.error}
        onConfirm={() =>
          update.mutate(
            { name: tenant.name, body: { active: !tenant.active } },
            { onSuccess: close },
          )
        }
      >
        {tenant.active
          ? "Its members are refused by the API (they see why) until it is activated again. Runs it already queued or started go on."
          : "Its members can use the portal again."}
      </ConfirmModal>
    </Group>
  );
}

export function TenantStatus({ tenant }: { tenant: AdminTenant }) {
  return tenant.active ? null : (
    <Badge size="xs" color="gray" variant="filled" radius="sm">
      deactivated
    </Badge>
  );
}
