import { Alert, Button, Group, Menu, Modal, Stack, Text, TextInput } from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { notifications } from "@mantine/notifications";
import {
  IconBan,
  IconChevronDown,
  IconCopy,
  IconDownload,
  IconPlayerPlay,
  IconPlus,
  IconTerminal2,
  IconFileCode,
  IconTrash,
  IconPencil,
  IconKey,
} from "@/components/icons";
import { useState } from "react";
import { ConfirmModal } from "@/components/confirm-modal";
import { Link, useNavigate } from "react-router";
import { apiUrl, errorMessage } from "@/lib/api-client";
import { specToCurl, specToYaml } from "@/lib/spec-text";
import { parameterValues } from "@/lib/spec";
import { isActiveStudy, type ParameterSpec, type Scalar, type Study } from "@/lib/types";
import { parseValueList, uniqueInOrder } from "@/lib/values";
import {
  useCancelStudy,
  useCloneStudy,
  useDeleteStudy,
  useExtendStudy,
  useSubmitStudy,
} from "../hooks/use-studies";
import { ObjectivesDialog } from "./objectives-dialog";

async function copy(text: string, what: string) {
  try {
    await navigator.clipboard.writeText(text);
    notifications.show({ message: `${what} copied to the clipboard`, color: "teal" });
  } catch {
    notifications.show({ message: `Could not copy ${what}: the browser refused`, color: "red" });
  }
}

export function StudyActions({ study }: { study: Study }) {
  const navigate = useNavigate();
  const [cancelOpen, cancelModal] = useDisclosure(false);
  const [cloneOpen, cloneModal] = useDisclosure(false);
  const [extendOpen, extendModal] = useDisclosure(false);
  const [deleteOpen, deleteModal] = useDisclosure(false);
  const [objectivesOpen, objectivesModal] = useDisclosure(false);
  const cancel = useCancelStudy();
  const submit = useSubmitStudy();
  const del = useDeleteStudy();
  const active = isActiveStudy(study.state);
  const draft = study.state === "draft";

  return (
    <>
      <Group gap="xs">
        {draft ? (
          <>
            <Button
              size="xs"
              variant="default"
              leftSection={<IconPencil size={14} />}
              component={Link}
              to={`/studies/${study.id}/edit`}
            >
              Edit draft
            </Button>
            <Button
              size="xs"
              leftSection={<IconPlayerPlay size={14} />}
              loading={submit.isPending}
              onClick={() =>
                submit.mutate(
                  { id: study.id, arg: undefined },
                  {
                    onSuccess: () =>
                      notifications.show({ message: "Study submitted", color: "teal" }),
                    onError: (e) =>
                      notifications.show({
                        title: "Not submitted",
                        message: errorMessage(e),
                        color: "red",
                      }),
                  },
                )
              }
            >
              Submit
            </Button>
          </>
        ) : (
          <Button
            size="xs"
            variant="default"
            leftSection={<IconDownload size={14} />}
            component="a"
            href={apiUrl(`/api/v1/studies/${study.id}/results.csv`)}
            download
            data-testid="download-csv"
          >
            Download CSV
          </Button>
        )}
        {/* sampled studies have no values to add; an adaptive one raises its budget (API) */}
        {!draft && !["lhs", "random", "adaptive"].includes(study.spec.combine ?? "grid") && (
          <Button
            size="xs"
            variant="default"
            leftSection={<IconPlus size={14} />}
            onClick={extendModal.open}
          >
            Extend
          </Button>
        )}
        {!draft && (
          <Button
            size="xs"
            variant="default"
            leftSection={<IconPencil size={14} />}
            onClick={objectivesModal.open}
            data-testid="edit-objectives"
          >
            Edit objectives
          </Button>
        )}
        <Button
          size="xs"
          variant="default"
          leftSection={<IconCopy size={14} />}
          onClick={cloneModal.open}
        >
          Clone
        </Button>
        <Menu position="bottom-end" withinPortal>
          <Menu.Target>
            <Button size="xs" variant="default" rightSection={<IconChevronDown size={14} />}>
              Spec
            </Button>
          </Menu.Target>
          <Menu.Dropdown>
            <Menu.Item
              leftSection={<IconTerminal2 size={14} />}
              onClick={() => copy(specToCurl(study.spec), "curl command")}
            >
              Copy as curl
            </Menu.Item>
            <Menu.Item
              leftSection={<IconFileCode size={14} />}
              onClick={() => copy(specToYaml(study.spec), "YAML spec")}
            >
              Copy as YAML
            </Menu.Item>
            <Menu.Item
              leftSection={<IconKey size={14} />}
              component={Link}
              to="/settings/tokens"
              data-testid="curl-token-link"
            >
              The curl command needs an API token: make one
            </Menu.Item>
          </Menu.Dropdown>
        </Menu>
        {active && (
          <Button
            size="xs"
            color="red"
            variant="light"
            leftSection={<IconBan size={14} />}
            onClick={cancelModal.open}
          >
            Cancel study
          </Button>
        )}
        {(draft || !active) && (
          <Button
            size="xs"
            color="red"
            variant="subtle"
            leftSection={<IconTrash size={14} />}
            onClick={deleteModal.open}
          >
            Delete
          </Button>
        )}
      </Group>

      {objectivesOpen && (
        <ObjectivesDialog study={study} opened={objectivesOpen} onClose={objectivesModal.close} />
      )}

      <ConfirmModal
        opened={cancelOpen}
        onClose={cancelModal.close}
        title="Cancel this study?"
        keepLabel="Keep running"
        confirmLabel="Cancel study"
        loading={cancel.isPending}
        error={cancel.error}
        onConfirm={() =>
          cancel.mutate({ id: study.id, arg: undefined }, { onSuccess: cancelModal.close })
        }
      >
        Queued runs will not start and running runs are stopped. Completed runs and their results
        stay.
      </ConfirmModal>

      <ConfirmModal
        opened={deleteOpen}
        onClose={deleteModal.close}
        title="Delete this study?"
        confirmLabel="Delete study"
        loading={del.isPending}
        error={del.error}
        onConfirm={() =>
          del.mutate(
            { id: study.id, arg: undefined },
            { onSuccess: () => navigate("/studies", { replace: true }) },
          )
        }
      >
        The study, its runs, results and archives are deleted for good.
      </ConfirmModal>

      <CloneModal study={study} opened={cloneOpen} onClose={cloneModal.close} />
      <ExtendModal study={study} opened={extendOpen} onClose={extendModal.close} />
    </>
  );
}

function CloneModal({
  study,
  opened,
  onClose,
}: {
  study: Study;
  opened: boolean;
  onClose: () => void;
}) {
  const [name, setName] = useState(`${study.name} (copy)`);
  const clone = useCloneStudy();
  const navigate = useNavigate();
  return (
    <Modal opened={opened} onClose={onClose} title="Clone as a new draft" centered>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          clone.mutate(
            { id: study.id, arg: name.trim() || undefined },
            {
              onSuccess: (s) => {
                onClose();
                if (s) navigate(`/studies/${s.id}/edit`);
              },
            },
          );
        }}
      >
        <Stack>
          <Text size="sm" c="dimmed">
            The clone starts as a draft with the same spec; change what you like, then submit.
          </Text>
          <TextInput
            label="Name"
            value={name}
            onChange={(e) => setName(e.currentTarget.value)}
            data-autofocus
            error={clone.error ? errorMessage(clone.error) : undefined}
          />
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={clone.isPending}>
              Clone and edit
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

function ExtendModal({
  study,
  opened,
  onClose,
}: {
  study: Study;
  opened: boolean;
  onClose: () => void;
}) {
  const names = Object.keys(study.spec.parameters ?? {});
  const [text, setText] = useState<Record<string, string>>({});
  const extend = useExtendStudy();
  const zip = study.spec.combine === "zip";
  // the stored spec describes every run the study has (an extension merges its values in)
  const existing = (name: string): Scalar[] => {
    const p = study.spec.parameters?.[name];
    return p === undefined ? [] : uniqueInOrder(parameterValues(p) ?? []);
  };

  const build = (): Record<string, ParameterSpec> => {
    const out: Record<string, ParameterSpec> = {};
    for (const name of names) {
      const added = parseValueList(text[name] ?? "");
      if (!added.length) continue;
      // grid: the union keeps every old combination (the server skips points it has)
      out[name] = { values: zip ? added : uniqueInOrder([...existing(name), ...added]) };
    }
    return out;
  };
  const params = build();
  const field =
    extend.error && "field" in extend.error
      ? (extend.error as { field: string | null }).field
      : null;

  return (
    <Modal opened={opened} onClose={onClose} title="Extend with new values" centered size="lg">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          extend.mutate(
            { id: study.id, arg: params },
            {
              onSuccess: (extended) => {
                const added = extended ? (extended.run_count ?? 0) - (study.run_count ?? 0) : null;
                notifications.show({
                  message:
                    added === null
                      ? "New runs queued"
                      : `${added} new ${added === 1 ? "run" : "runs"} queued`,
                  color: "teal",
                });
                setText({});
                onClose();
              },
            },
          );
        }}
      >
        <Stack>
          <Text size="sm" c="dimmed">
            {zip
              ? "This study zips its parameters: give the same number of new values for each."
              : "New values combine with every value of the other parameters; runs that already exist are not repeated."}
          </Text>
          {names.map((name) => (
            <TextInput
              key={name}
              label={name}
              description={`now: ${existing(name).slice(0, 12).join(", ")}${existing(name).length > 12 ? ", …" : ""}`}
              placeholder="values to add, e.g. 14, 16"
              value={text[name] ?? ""}
              onChange={(e) => {
                const value = e.currentTarget.value;
                setText((t) => ({ ...t, [name]: value }));
              }}
              error={field === `parameters.${name}` ? errorMessage(extend.error) : undefined}
            />
          ))}
          {extend.error && !(field ?? "").startsWith("parameters.") && (
            <Alert color="red">{errorMessage(extend.error)}</Alert>
          )}
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" disabled={!Object.keys(params).length} loading={extend.isPending}>
              Add runs
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}
