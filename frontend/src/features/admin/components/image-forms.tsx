import { Button, Group, Modal, MultiSelect, SegmentedControl, Stack, Text } from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { notifications } from "@mantine/notifications";
import { useState, type FormEvent } from "react";
import { IconPlus } from "@/components/icons";
import type { AdminImage } from "../api/admin";
import { useComposeImage, useRebuildImage, useRetireImage } from "../hooks/use-admin";
import { fieldError } from "../api/field-error";
import { ConfirmModal } from "@/components/confirm-modal";
import { AdminLink, FormError } from "./form-parts";

/** Compose a package set into an image (found by digest, else created and built). */
export function ComposeImageButton({ packages }: { packages: string[] }) {
  const [opened, modal] = useDisclosure(false);
  const compose = useComposeImage();
  const [chosen, setChosen] = useState<string[]>([]);
  const [kind, setKind] = useState<"container" | "vm">("container");
  const submit = (e: FormEvent) => {
    e.preventDefault();
    compose.mutate(
      { packages: chosen, kind },
      {
        onSuccess: (image) => {
          notifications.show({
            message: `${image.display}: ${image.status === "ready" ? "ready (it existed)" : image.status}`,
            color: "teal",
          });
          modal.close();
          setChosen([]);
          compose.reset();
        },
      },
    );
  };
  return (
    <>
      <Button size="xs" leftSection={<IconPlus size={14} />} onClick={modal.open}>
        Compose image
      </Button>
      <Modal opened={opened} onClose={modal.close} title="Compose an image">
        <form onSubmit={submit}>
          <Stack gap="sm">
            <MultiSelect
              label="Packages"
              description="their dependencies are added; the same closure gives the same image"
              data={packages}
              value={chosen}
              onChange={setChosen}
              searchable
              error={fieldError(compose.error, "packages")}
            />
            <div>
              <Text size="sm" fw={500} mb={4}>
                Kind
              </Text>
              <SegmentedControl
                value={kind}
                onChange={(v) => setKind(v as "container" | "vm")}
                data={[
                  { value: "container", label: "Container" },
                  { value: "vm", label: "VM (OpenStack)" },
                ]}
              />
            </div>
            <FormError error={compose.error} fields={["packages", "kind"]} />
            <Group justify="flex-end">
              <Button type="submit" loading={compose.isPending} disabled={!chosen.length}>
                Compose and build
              </Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  );
}

/** Rebuild or retire an image, each asked first; its Django admin form. */
export function ImageActions({ image }: { image: AdminImage }) {
  const [dialog, setDialog] = useState<"rebuild" | "retire" | null>(null);
  const rebuild = useRebuildImage();
  const retire = useRetireImage();
  const close = () => {
    rebuild.reset();
    retire.reset();
    setDialog(null);
  };
  const label = `${image.name}@${image.digest.slice(0, 19)}…`;
  return (
    <Group gap={6} wrap="nowrap" justify="flex-end">
      <AdminLink href={image.admin_url} />
      <Button
        size="compact-xs"
        variant="default"
        disabled={image.status === "building"}
        onClick={() => setDialog("rebuild")}
      >
        Rebuild
      </Button>
      {image.status !== "retired" && (
        <Button
          size="compact-xs"
          variant="subtle"
          color="red"
          disabled={image.status === "building"}
          onClick={() => setDialog("retire")}
        >
          Retire
        </Button>
      )}
      <ConfirmModal
        opened={dialog === "rebuild"}
        onClose={close}
        title={`Rebuild ${label}?`}
        confirmLabel="Rebuild"
        color="blue"
        loading={rebuild.isPending}
        error={rebuild.error}
        onConfirm={() => rebuild.mutate(image.id, { onSuccess: close })}
      >
        The same packages are built again from scratch; runs waiting for it start when it is ready.
      </ConfirmModal>
      <ConfirmModal
        opened={dialog === "retire"}
        onClose={close}
        title={`Retire ${label}?`}
        confirmLabel="Retire image"
        loading={retire.isPending}
        error={retire.error}
        onConfirm={() => retire.mutate(image.id, { onSuccess: close })}
      >
        No new runs may use it and it is removed from this host&apos;s storage. Runs queued for it
        fail, saying it was retired; runs running in it must end first.
      </ConfirmModal>
    </Group>
  );
}
