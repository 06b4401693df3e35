import {
  Autocomplete,
  Button,
  Group,
  Modal,
  NumberInput,
  Select,
  SimpleGrid,
  Stack,
  Text,
  TextInput,
} from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { notifications } from "@mantine/notifications";
import { useState, type FormEvent } from "react";
import { IconPlus } from "@/components/icons";
import type { AdminBackend, AdminImage, Pool, PoolCreate } from "../api/admin";
import { fieldError } from "../api/field-error";
import { useCreatePool, useDeletePool } from "../hooks/use-admin";
import { ConfirmModal } from "@/components/confirm-modal";
import { FormError } from "./form-parts";
import { plural } from "@/lib/format";

const FIELDS = [
  "name",
  "backend",
  "flavor",
  "image",
  "nodes",
  "min_workers",
  "max_workers",
  "idle_timeout",
  "boot_timeout",
] as const;
type Field = (typeof FIELDS)[number];
type Form = Record<Field, string | number>;

const EMPTY: Form = {
  name: "",
  backend: "",
  flavor: "",
  image: "",
  nodes: 1,
  min_workers: 0,
  max_workers: 4,
  idle_timeout: 300,
  boot_timeout: 600,
};

/** The request: text fields trimmed, numbers as numbers (an empty number is left to the API). */
function bodyOf(form: Form): PoolCreate {
  const num = (v: string | number) => (v === "" ? undefined : Number(v));
  return {
    name: String(form.name).trim(),
    backend: String(form.backend),
    flavor: String(form.flavor).trim(),
    image: String(form.image).trim(),
    nodes: num(form.nodes),
    min_workers: num(form.min_workers),
    max_workers: num(form.max_workers),
    idle_timeout: num(form.idle_timeout),
    boot_timeout: num(form.boot_timeout),
  };
}

/**
 * A new pool: its shape (backend, flavor, image, nodes per worker) and bounds. The API checks
 * the flavor, the image and `max_workers` against the cloud; its 400 shows under the field.
 */
function PoolFormModal({
  backends,
  images,
  onClose,
}: {
  backends: AdminBackend[];
  images: AdminImage[];
  onClose: () => void;
}) {
  const create = useCreatePool();
  const clouds = backends.filter((b) => b.kind === "openstack");
  const [form, setForm] = useState<Form>(EMPTY);
  // the first OpenStack backend until one is chosen (the backends may load after the modal)
  const backend = String(form.backend) || clouds[0]?.name || "";
  const set = (field: Field) => (value: string | number | null) =>
    setForm((f) => ({ ...f, [field]: value ?? "" }));
  const error = (field: Field) => fieldError(create.error, field);
  const ready = images.filter((i) => i.kind === "vm" && i.status === "ready");
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate(bodyOf({ ...form, backend }), {
      onSuccess: (pool) => {
        notifications.show({ message: `Pool ${pool.name} created`, color: "teal" });
        onClose();
      },
    });
  };
  const number = (field: Field, label: string, min: number, description?: string) => (
    <NumberInput
      label={label}
      description={description}
      min={min}
      value={form[field]}
      onChange={set(field)}
      error={error(field)}
    />
  );
  return (
    <Modal opened onClose={onClose} title="New warm pool" size="lg" centered>
      <form onSubmit={submit} aria-label="New warm pool">
        <Stack gap="sm">
          <TextInput
            label="Name"
            description="a slug: metrics and wait reasons name it"
            required
            value={String(form.name)}
            onChange={(e) => set("name")(e.currentTarget.value)}
            error={error("name")}
          />
          <Select
            label="Backend"
            description={clouds.length ? "an OpenStack backend" : "no OpenStack backend yet"}
            data={clouds.map((b) => b.name)}
            value={backend || null}
            onChange={set("backend")}
            allowDeselect={false}
            error={error("backend")}
          />
          <SimpleGrid cols={2}>
            <TextInput
              label="Flavor"
              description="the cloud's flavor name or id"
              required
              value={String(form.flavor)}
              onChange={(e) => set("flavor")(e.currentTarget.value)}
              error={error("flavor")}
            />
            <Autocomplete
              label="Image"
              description="a composed VM image's digest or id"
              required
              data={ready.map((i) => i.digest)}
              value={String(form.image)}
              onChange={set("image")}
              error={error("image")}
            />
          </SimpleGrid>
          <SimpleGrid cols={3}>
            {number("nodes", "Nodes per worker", 1)}
            {number("min_workers", "Min workers", 0, "0: none while nothing waits")}
            {number("max_workers", "Max workers", 0)}
          </SimpleGrid>
          <SimpleGrid cols={2}>
            {number("idle_timeout", "Idle timeout (s)", 0, "an idle worker is kept this long")}
            {number("boot_timeout", "Boot timeout (s)", 5, "to register, or a failed boot")}
          </SimpleGrid>
          <FormError error={create.error} fields={FIELDS} />
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={create.isPending}>
              Create pool
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

export function NewPoolButton({
  backends,
  images,
}: {
  backends: AdminBackend[];
  images: AdminImage[];
}) {
  const [opened, modal] = useDisclosure(false);
  return (
    <>
      <Button size="xs" leftSection={<IconPlus size={14} />} onClick={modal.open}>
        New pool
      </Button>
      {opened && <PoolFormModal backends={backends} images={images} onClose={modal.close} />}
    </>
  );
}

/** Delete a pool: at once when it has no live worker, else it drains (shown as "draining"). */
export function DeletePoolButton({ pool }: { pool: Pool }) {
  const [opened, modal] = useDisclosure(false);
  const del = useDeletePool();
  const live = pool.workers.filter((w) => !["deleted", "lost", "failed"].includes(w.state ?? ""));
  const close = () => {
    del.reset();
    modal.close();
  };
  return (
    <>
      <Button
        size="compact-xs"
        variant="default"
        color="red"
        disabled={pool.draining}
        onClick={modal.open}
        aria-label={`Delete ${pool.name}`}
      >
        {pool.draining ? "Draining…" : "Delete"}
      </Button>
      <ConfirmModal
        opened={opened}
        onClose={close}
        title={`Delete pool ${pool.name}?`}
        confirmLabel="Delete pool"
        loading={del.isPending}
        error={del.error}
        onConfirm={() => del.mutate(pool.name, { onSuccess: close })}
      >
        <Text size="sm">
          {live.length
            ? `It has ${plural(live.length, "live worker")}: it drains first. It boots nothing more and takes no new run; idle workers are deleted at once, busy ones when their runs end, then the pool.`
            : "It has no live worker: it is deleted at once."}{" "}
          Its runs that wait start on servers of their own.
        </Text>
      </ConfirmModal>
    </>
  );
}
