import { Alert, Badge, Button, Group, List, Modal, Stack, Text, TextInput } from "@mantine/core";
import { useState } from "react";
import { IconAlertTriangle } from "@/components/icons";
import { ObjectivesTable } from "@/components/objectives-table";
import { ApiError, errorMessage } from "@/lib/api-client";
import { objectiveRows, objectivesSpec, type ObjectiveRow } from "@/lib/objectives";
import type { ObjectiveSpec, Study } from "@/lib/types";
import type { TrustRules } from "../api/studies";
import { useStudyInspection, useUpdateObjectives } from "../hooks/use-studies";
import {
  type Change,
  objectivesDiff,
  objectivesToSave,
  TRUST_RULES,
  trustAfter,
  trustDiff,
} from "../lib/objectives-diff";

const KIND_COLOR = { added: "teal", removed: "red", changed: "blue" } as const;

/** What a save will change, before → after; nothing else is written. */
export function ChangesList({ changes }: { changes: Change[] }) {
  if (changes.length === 0)
    return (
      <Text size="sm" c="dimmed" data-testid="objectives-diff">
        No change yet: a save writes only what you change here.
      </Text>
    );
  return (
    <Stack gap={4} data-testid="objectives-diff">
      <Text size="sm" fw={600}>
        Saving changes only this:
      </Text>
      <List size="sm" spacing={2} listStyleType="none">
        {changes.map((c) => (
          <List.Item key={c.what} data-testid="objectives-change">
            <Badge color={KIND_COLOR[c.kind]} variant="light" size="xs" radius="sm" mr={6}>
              {c.kind}
            </Badge>
            {c.what}:{" "}
            <Text span ff="monospace" size="sm">
              {c.kind === "added"
                ? c.after
                : c.kind === "removed"
                  ? c.before
                  : `${c.before} → ${c.after}`}
            </Text>
          </List.Item>
        ))}
      </List>
    </Stack>
  );
}

/**
 * Edit or add a study's objectives after its runs: the portal recomputes every finished run's
 * objectives (and trust flag) from the series it stored, without running anything again.
 */
export function ObjectivesDialog({
  study,
  opened,
  onClose,
}: {
  study: Study;
  opened: boolean;
  onClose: () => void;
}) {
  const [rows, setRows] = useState<ObjectiveRow[]>(() => objectiveRows(study.objectives ?? {}));
  // what is wrong shows once a save was tried, not while a new row is still blank
  const [tried, setTried] = useState(false);
  const rules = ((study.spec as { trust?: TrustRules }).trust ?? {}) as TrustRules;
  // a rule the spec does not set stays unset (its default applies) unless typed
  const [typed, setTyped] = useState<Record<string, string>>(() =>
    Object.fromEntries(
      TRUST_RULES.map((r) => [r.key, (rules as Record<string, number | undefined>)[r.key]])
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, String(v)]),
    ),
  );
  const inspection = useStudyInspection(study, opened);
  const save = useUpdateObjectives();
  const error = save.error;
  const field = error instanceof ApiError ? error.field : null;
  const spec = objectivesSpec(rows);
  const errors = {
    ...(tried ? spec.errors : {}),
    ...(field && error ? { [field]: errorMessage(error) } : {}),
  };
  const before = ((study.spec as { objectives?: Record<string, ObjectiveSpec> }).objectives ??
    study.objectives ??
    {}) as Record<string, ObjectiveSpec>;
  const objectives = objectivesToSave(before, spec.objectives);
  const badRules = TRUST_RULES.filter((r) => {
    const text = (typed[r.key] ?? "").trim();
    return text !== "" && !(Number(text) > 0);
  }).map((r) => r.key);
  const trust = trustAfter(rules, typed);
  const trustChanges = badRules.length ? [] : trustDiff(rules, trust);
  const changes = [...objectivesDiff(before, spec.objectives), ...trustChanges];

  return (
    <Modal opened={opened} onClose={onClose} title="Edit objectives" size="xl" centered>
      <Stack gap="sm">
        <Text size="sm" c="dimmed">
          Objectives are computed from the series each run stored: changing them recomputes the
          finished runs (and their trust flag) without running anything again. Runs still going use
          the new objectives when they end.
        </Text>
        <ObjectivesTable
          label="Objectives to edit"
          rows={rows}
          onChange={setRows}
          errors={errors}
          hints={inspection.data?.series ?? []}
        />
        <Group gap="sm" align="flex-end">
          <Text size="sm">Trust rules (left empty: the default, shown greyed)</Text>
          {TRUST_RULES.map((r) => (
            <TextInput
              key={r.key}
              size="xs"
              w={130}
              label={r.label}
              placeholder={String(r.fallback)}
              value={typed[r.key] ?? ""}
              onChange={(e) => {
                const value = e.currentTarget.value;
                setTyped((t) => ({ ...t, [r.key]: value }));
              }}
              error={
                badRules.includes(r.key)
                  ? "a number above 0"
                  : field === `trust.${r.key}`
                    ? true
                    : undefined
              }
            />
          ))}
        </Group>
        <ChangesList changes={changes} />
        {error && (
          <Alert
            color="red"
            variant="light"
            icon={<IconAlertTriangle size={16} />}
            role="alert"
            title="Not saved"
          >
            {errorMessage(error)}
          </Alert>
        )}
        <Group justify="flex-end">
          <Button variant="default" onClick={onClose}>
            Close
          </Button>
          <Button
            loading={save.isPending}
            disabled={changes.length === 0 || badRules.length > 0}
            data-testid="save-objectives"
            onClick={() => {
              setTried(true);
              if (Object.keys(spec.errors).length) return;
              save.mutate(
                // the trust rules go only when the user changed them
                { id: study.id, objectives, ...(trustChanges.length ? { trust } : {}) },
                { onSuccess: onClose },
              );
            }}
          >
            Save and recompute
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}
