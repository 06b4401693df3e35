import { Alert, Button, Group, Modal, Stack, Text, TextInput } from "@mantine/core";
import { useState } from "react";
import { IconAlertTriangle } from "@/components/icons";
import { ObjectivesTable } from "@/components/objectives-table";
import { ApiError, errorMessage } from "@/lib/api-client";
import { objectiveRows, objectivesSpec, type ObjectiveRow } from "@/lib/objectives";
import type { Study } from "@/lib/types";
import type { TrustRules } from "../api/studies";
import { useStudyInspection, useUpdateObjectives } from "../hooks/use-studies";

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
  const [residualsBelow, setResidualsBelow] = useState(String(rules.residuals_below ?? 0.001));
  const [driftBelow, setDriftBelow] = useState(String(rules.drift_below ?? 0.001));
  const inspection = useStudyInspection(study, opened);
  const save = useUpdateObjectives();
  const error = save.error;
  const field = error instanceof ApiError ? error.field : null;
  const spec = objectivesSpec(rows);
  const errors = {
    ...(tried ? spec.errors : {}),
    ...(field && error ? { [field]: errorMessage(error) } : {}),
  };

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
          <Text size="sm">A completed run is trusted as converged when</Text>
          <TextInput
            size="xs"
            w={110}
            label="residuals below"
            value={residualsBelow}
            onChange={(e) => setResidualsBelow(e.currentTarget.value)}
            error={field === "trust.residuals_below" ? true : undefined}
          />
          <TextInput
            size="xs"
            w={110}
            label="objectives drift below"
            value={driftBelow}
            onChange={(e) => setDriftBelow(e.currentTarget.value)}
            error={field === "trust.drift_below" ? true : undefined}
          />
        </Group>
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
            data-testid="save-objectives"
            onClick={() => {
              setTried(true);
              if (Object.keys(spec.errors).length) return;
              save.mutate(
                {
                  id: study.id,
                  objectives: spec.objectives,
                  trust: {
                    ...rules,
                    residuals_below: Number(residualsBelow),
                    drift_below: Number(driftBelow),
                  },
                },
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
