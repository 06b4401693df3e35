import { Alert, Button, Group, NumberInput, Select, Stack, TextInput } from "@mantine/core";
import { useState, type ReactNode } from "react";
import { IconAlertTriangle } from "@/components/icons";
import { formatInt } from "@/lib/format";
import { type ContinueDraft, type DraftErrors, LATEST, MAX_ITERATIONS } from "@/lib/continuation";
import { SettingsEditor } from "./settings-editor";

/**
 * The fields of a continuation: the iterations to add, the write to go on from (one run's
 * writes, newest first, or a time typed for a selection of runs) and the settings a restart
 * changes. The draft is the caller's, so what the user typed outlives a refusal.
 */
export function ContinueFields({
  draft,
  onChange,
  errors,
  iterationsRequired,
  writes,
}: {
  draft: ContinueDraft;
  onChange: (draft: ContinueDraft) => void;
  errors: DraftErrors;
  iterationsRequired: boolean;
  /** one run's complete writes, earliest first; none: a time is typed (a selection of runs) */
  writes?: string[];
}) {
  const [settingsOpen, setSettingsOpen] = useState(draft.settings.length > 0);
  const settingsErrors = Object.keys(errors).some(
    (k) => k === "settings" || k.startsWith("setting."),
  );
  const patch = (p: Partial<ContinueDraft>) => onChange({ ...draft, ...p });
  const latest = writes?.[writes.length - 1];
  return (
    <Stack gap="sm">
      <NumberInput
        label="Iterations to add"
        description={
          iterationsRequired
            ? "time steps from the write (the case's deltaT each)"
            : "time steps from the write; empty: on to the case's endTime"
        }
        required={iterationsRequired}
        min={1}
        max={MAX_ITERATIONS}
        allowDecimal={false}
        allowNegative={false}
        placeholder={`1 to ${formatInt(MAX_ITERATIONS)}`}
        value={draft.iterations}
        onChange={(v) => patch({ iterations: v })}
        error={errors.iterations}
      />
      {writes ? (
        <Select
          label="From write"
          description="the run's complete writes, newest first: an earlier one restarts from there"
          data={[
            { value: LATEST, label: latest ? `latest (time ${latest})` : "latest" },
            ...[...writes].reverse().map((t) => ({ value: t, label: `time ${t}` })),
          ]}
          value={draft.time || LATEST}
          onChange={(v) => patch({ time: v ?? LATEST })}
          allowDeselect={false}
          searchable
          error={errors.time}
        />
      ) : (
        <TextInput
          label="From write"
          description='"latest", or a write time the runs have (runs without it are skipped)'
          placeholder={LATEST}
          value={draft.time}
          onChange={(e) => patch({ time: e.currentTarget.value })}
          error={errors.time}
        />
      )}
      <SettingsEditor
        rows={draft.settings}
        onChange={(settings) => patch({ settings })}
        errors={errors}
        opened={settingsOpen || settingsErrors}
        onToggle={() => setSettingsOpen(!(settingsOpen || settingsErrors))}
      />
    </Stack>
  );
}

/**
 * The end of a continue form: the API's refusal that names no field (`error`, under
 * `errorTitle`), what goes between it and the buttons (`children`), then Cancel and submit.
 */
export function ContinueFooter({
  error,
  errorTitle,
  onCancel,
  submitLabel,
  pending,
  children,
}: {
  error?: string;
  errorTitle: string;
  onCancel: () => void;
  submitLabel: string;
  pending: boolean;
  children?: ReactNode;
}) {
  return (
    <>
      {error && (
        <Alert
          color="red"
          variant="light"
          icon={<IconAlertTriangle size={16} />}
          role="alert"
          title={errorTitle}
          data-testid="continue-error"
        >
          {error}
        </Alert>
      )}
      {children}
      <Group justify="flex-end">
        <Button variant="default" onClick={onCancel}>
          Cancel
        </Button>
        <Button type="submit" loading={pending} data-testid="continue-submit">
          {submitLabel}
        </Button>
      </Group>
    </>
  );
}
