import { Button, Modal, Stack, Text, Tooltip, VisuallyHidden } from "@mantine/core";
import { useDisclosure, useId } from "@mantine/hooks";
import { notifications } from "@mantine/notifications";
import { useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { ContinueFields, ContinueFooter } from "@/components/continue-fields";
import { IconPlayerPlay } from "@/components/icons";
import { ApiError } from "@/lib/api-client";
import {
  checkDraft,
  type ContinueDraft,
  continueBody,
  draftTime,
  emptyDraft,
  filledSettings,
  LATEST,
  placeError,
} from "@/lib/continuation";
import { isActiveRun, type RunDetail } from "@/lib/types";
import { runKeys, useContinueRun } from "../hooks/use-run";

/**
 * "Continue…" on an ended run's page: more iterations from its latest write, or a restart
 * from an earlier write with changed settings. Shown disabled, with the reason, when the run
 * cannot go on; not shown while the run is active. What the user typed is kept until the
 * run goes on.
 */
export function ContinueRunButton({ run }: { run: RunDetail }) {
  const [opened, modal] = useDisclosure(false);
  const [draft, setDraft] = useState<ContinueDraft>(emptyDraft);
  const reasonId = useId();
  if (isActiveRun(run.state)) return null;
  const problem = run.continuation.problem;
  if (problem)
    // disabled in look and effect, yet focusable: the reason shows on hover and on focus
    return (
      <>
        <Tooltip label={problem} multiline w={320} withArrow>
          <Button
            size="xs"
            variant="default"
            leftSection={<IconPlayerPlay size={14} />}
            data-disabled
            aria-disabled="true"
            aria-describedby={reasonId}
            onClick={(e) => e.preventDefault()}
            data-testid="continue-run"
          >
            Continue…
          </Button>
        </Tooltip>
        <VisuallyHidden id={reasonId}>{`Cannot go on: ${problem}`}</VisuallyHidden>
      </>
    );
  return (
    <>
      <Button
        size="xs"
        variant="default"
        leftSection={<IconPlayerPlay size={14} />}
        onClick={modal.open}
        data-testid="continue-run"
      >
        Continue…
      </Button>
      {opened && (
        <ContinueRunModal
          run={run}
          draft={draft}
          onDraftChange={setDraft}
          onClose={modal.close}
          onDone={() => {
            setDraft(emptyDraft());
            modal.close();
          }}
        />
      )}
    </>
  );
}

function ContinueRunModal({
  run,
  draft,
  onDraftChange,
  onClose,
  onDone,
}: {
  run: RunDetail;
  draft: ContinueDraft;
  onDraftChange: (draft: ContinueDraft) => void;
  onClose: () => void;
  onDone: () => void;
}) {
  const qc = useQueryClient();
  const go = useContinueRun();
  // what is wrong shows once a send was tried, not while the form is being filled in
  const [tried, setTried] = useState(false);
  const writes = run.continuation.writes;
  const time = draftTime(draft);
  const fromLatest = time === LATEST || time === writes[writes.length - 1];
  // from the latest write of a run that completed, the solver has nothing left to do
  const iterationsRequired = fromLatest && run.state === "completed";
  const check = checkDraft(draft, { iterationsRequired });
  const errors = { ...(tried ? check : {}), ...placeError(go.error, draft) };
  const restart = !fromLatest || filledSettings(draft).length > 0;
  const title = `${restart ? "Restart" : "Continue"} run ${run.index}`;

  const change = (next: ContinueDraft) => {
    onDraftChange(next);
    if (go.error) go.reset();
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setTried(true);
    if (Object.keys(check).length) return;
    go.mutate(
      { id: run.id, body: continueBody(draft) },
      {
        onSuccess: (next) => {
          notifications.show({
            color: "teal",
            message: `Run ${next.index} goes on from ${fromLatest ? "its latest write" : `time ${time}`}: queued again`,
          });
          onDone();
        },
        onError: (error) => {
          // it changed meanwhile (another user continued it): show what it is now
          if (error instanceof ApiError && error.status === 409)
            void qc.invalidateQueries({ queryKey: runKeys.detail(run.id) });
        },
      },
    );
  };

  return (
    <Modal opened onClose={onClose} title={title} size="lg" centered>
      <form onSubmit={submit} aria-label={title} noValidate>
        <Stack gap="sm">
          <Text size="sm" c="dimmed">
            The run is queued again as a new attempt that starts from the write you choose: its
            residuals and forces go on from there, and the core-hours it used so far stay counted.
          </Text>
          <ContinueFields
            draft={draft}
            onChange={change}
            errors={errors}
            iterationsRequired={iterationsRequired}
            writes={writes}
          />
          <ContinueFooter
            error={errors.form}
            errorTitle="The run does not go on"
            onCancel={onClose}
            submitLabel={restart ? "Restart run" : "Continue run"}
            pending={go.isPending}
          />
        </Stack>
      </form>
    </Modal>
  );
}
