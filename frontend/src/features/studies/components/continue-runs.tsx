import { Alert, Anchor, Button, Group, List, Modal, Stack, Text } from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { notifications } from "@mantine/notifications";
import { useState, type FormEvent } from "react";
import { Link } from "react-router";
import { ContinueFields, ContinueFooter } from "@/components/continue-fields";
import { IconPlayerPlay } from "@/components/icons";
import {
  checkDraft,
  type ContinueDraft,
  continueBody,
  draftTime,
  emptyDraft,
  LATEST,
  placeError,
  skippedOf,
} from "@/lib/continuation";
import { plural } from "@/lib/format";
import type { ContinuedRuns, SkippedRun } from "@/lib/types";
import { useContinueStudyRuns } from "../hooks/use-studies";

/** "3 runs continue; 2 skipped" */
function continuedSummary(result: ContinuedRuns): string {
  const n = result.continued.length;
  return `${plural(n, "run continues", "runs continue")}; ${result.skipped.length} skipped`;
}

/** The runs a continuation left, each with why, linked to its page. */
function SkippedList({ skipped }: { skipped: SkippedRun[] }) {
  if (skipped.length === 0) return null;
  return (
    <List size="sm" spacing={2} data-testid="skipped-runs">
      {skipped.map((s) => (
        <List.Item key={s.run} data-testid="skipped-run">
          <Anchor component={Link} to={`/runs/${s.run}`} size="sm">
            Run {s.index}
          </Anchor>
          : {s.reason}
        </List.Item>
      ))}
    </List>
  );
}

/**
 * "Continue selected…" over a study's runs table: the same iterations, write and settings
 * for every run ticked; the runs that cannot go on (still active, no such write, …) are
 * skipped and listed with the reason. What the user typed is kept until the runs go on.
 */
export function ContinueSelectedButton({
  studyId,
  runIds,
}: {
  studyId: string;
  /** the runs ticked, on any page */
  runIds: string[];
}) {
  const [opened, modal] = useDisclosure(false);
  const [draft, setDraft] = useState<ContinueDraft>(emptyDraft);
  const [result, setResult] = useState<ContinuedRuns | null>(null);
  const close = () => {
    modal.close();
    setResult(null);
  };
  return (
    <>
      <Button
        size="xs"
        variant="default"
        leftSection={<IconPlayerPlay size={14} />}
        disabled={runIds.length === 0}
        onClick={modal.open}
        data-testid="continue-selected"
      >
        Continue selected…
      </Button>
      {opened && (
        <Modal
          opened
          onClose={close}
          title={`Continue ${plural(runIds.length, "selected run")}`}
          size="lg"
          centered
        >
          {result ? (
            <Stack gap="sm">
              <Alert
                color={result.skipped.length ? "yellow" : "teal"}
                variant="light"
                title={continuedSummary(result)}
                data-testid="continue-result"
              >
                {result.skipped.length
                  ? "The runs skipped, and why:"
                  : "Each goes on from its write as a new attempt; the table follows them."}
              </Alert>
              <SkippedList skipped={result.skipped} />
              <Group justify="flex-end">
                <Button onClick={close}>Close</Button>
              </Group>
            </Stack>
          ) : (
            <ContinueRunsForm
              studyId={studyId}
              runIds={runIds}
              draft={draft}
              onDraftChange={setDraft}
              onCancel={close}
              onDone={(r) => {
                setDraft(emptyDraft());
                setResult(r);
              }}
            />
          )}
        </Modal>
      )}
    </>
  );
}

function ContinueRunsForm({
  studyId,
  runIds,
  draft,
  onDraftChange,
  onCancel,
  onDone,
}: {
  studyId: string;
  runIds: string[];
  draft: ContinueDraft;
  onDraftChange: (draft: ContinueDraft) => void;
  onCancel: () => void;
  onDone: (result: ContinuedRuns) => void;
}) {
  const go = useContinueStudyRuns();
  const [tried, setTried] = useState(false);
  // a run that completed has nothing left from its latest write: the iterations say how far
  const check = checkDraft(draft, { iterationsRequired: draftTime(draft) === LATEST });
  const errors = { ...(tried ? check : {}), ...placeError(go.error, draft) };
  const skipped = skippedOf(go.error);
  const change = (next: ContinueDraft) => {
    onDraftChange(next);
    if (go.error) go.reset();
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setTried(true);
    if (Object.keys(check).length) return;
    go.mutate(
      { id: studyId, body: { runs: runIds, ...continueBody(draft) } },
      {
        onSuccess: (result) => {
          notifications.show({
            color: result.skipped.length ? "yellow" : "teal",
            message: continuedSummary(result),
          });
          onDone(result);
        },
      },
    );
  };
  const label = `Continue ${plural(runIds.length, "selected run")}`;
  return (
    <form onSubmit={submit} aria-label={label} noValidate>
      <Stack gap="sm">
        <Text size="sm" c="dimmed">
          Each ended run is queued again as a new attempt from its write, with the same iterations
          and settings; runs that cannot go on are skipped and listed with the reason.
        </Text>
        <ContinueFields
          draft={draft}
          onChange={change}
          errors={errors}
          iterationsRequired={draftTime(draft) === LATEST}
        />
        <ContinueFooter
          error={errors.form}
          errorTitle="No run goes on"
          onCancel={onCancel}
          submitLabel={label}
          pending={go.isPending}
        >
          <SkippedList skipped={skipped} />
        </ContinueFooter>
      </Stack>
    </form>
  );
}
