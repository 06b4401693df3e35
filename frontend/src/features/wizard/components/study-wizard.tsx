import {
  Alert,
  Anchor,
  Box,
  Button,
  Code,
  Grid,
  Group,
  Paper,
  SegmentedControl,
  Stack,
  Stepper,
  Text,
  TextInput,
  Textarea,
  Title,
} from "@mantine/core";
import { IconAlertTriangle, IconDeviceFloppy, IconPlayerPlay } from "@/components/icons";
import { useMemo, useState, type ReactNode } from "react";
import { Link } from "react-router";
import { CopyTextButton } from "@/components/copy-button";
import { ApiError, errorMessage } from "@/lib/api-client";
import { specToCurl, specToYaml } from "@/lib/spec-text";
import type { Backend, CaseTemplate, SolverPackage, Study } from "@/lib/types";
import { usePreview, useSaveStudy } from "../hooks/use-preview";
import { formFromTemplate, formFromUpload, type WizardForm } from "../lib/form";
import { offeredSeries } from "../lib/series";
import { stepOfField, toSpec } from "../lib/to-spec";
import { ConvergenceForm } from "./convergence-form";
import { ObjectivesEditor } from "./objectives-editor";
import { ParameterEditor } from "./parameter-editor";
import { PreviewPanel, PreviewRows } from "./preview-panel";
import { RunConfig } from "./run-config";
import { UploadDropzone } from "./upload-dropzone";
import { plural } from "@/lib/format";

const STEPS = ["Case", "Parameters", "Run configuration", "Objectives", "Review"] as const;
// Errors the user has not had a chance to cause yet stay quiet until they try to save.
const QUIET_UNTIL_SAVE = new Set(["name", "template", "case"]);

export interface StudyWizardProps {
  templates: CaseTemplate[];
  packages: SolverPackage[];
  backends: Backend[];
  initial: WizardForm;
  editId: string | null;
  renderTemplatePicker: (selected: string | null, onSelect: (t: CaseTemplate) => void) => ReactNode;
  onSaved: (study: Study, draft: boolean) => void;
}

export function StudyWizard({
  templates,
  packages,
  backends,
  initial,
  editId,
  renderTemplatePicker,
  onSaved,
}: StudyWizardProps) {
  const [form, setForm] = useState<WizardForm>(initial);
  const [step, setStep] = useState(0);
  const [triedSave, setTriedSave] = useState(false);
  const update = (patch: Partial<WizardForm>) => setForm((f) => ({ ...f, ...patch }));
  const template = templates.find((t) => t.name === form.template) ?? null;
  const offered = useMemo(() => offeredSeries(form, template), [form, template]);

  const { spec, errors: localErrors } = useMemo(() => toSpec(form), [form]);
  const blocking = Object.keys(localErrors).filter((k) => k !== "name");
  const preview = usePreview(spec, blocking.length === 0);
  const save = useSaveStudy(editId);

  const serverError = (save.error ?? (preview.isError ? preview.error : null)) as unknown;
  const errors = useMemo(() => {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(localErrors)) {
      if (triedSave || !QUIET_UNTIL_SAVE.has(k)) out[k] = v;
    }
    if (serverError instanceof ApiError && serverError.field && !out[serverError.field]) {
      out[serverError.field] = serverError.message;
    }
    return out;
  }, [localErrors, serverError, triedSave]);

  const stepErrors = (i: number) => Object.keys(errors).filter((k) => stepOfField(k) === i).length;
  // a step left behind is done only when nothing on it is missing, marked yet or not (an
  // empty study name is not complained about before a save, but its step is not done)
  const stepUnfinished = (i: number) =>
    Object.keys(localErrors).some((k) => stepOfField(k) === i) || stepErrors(i) > 0;

  const submit = (draft: boolean) => {
    setTriedSave(true);
    const problems = Object.keys(localErrors);
    if (problems.length) {
      setStep(stepOfField(problems[0]));
      return;
    }
    save.mutate(
      { spec, draft },
      {
        onSuccess: (study) => onSaved(study, draft),
        onError: (e) => {
          if (e instanceof ApiError && e.field) setStep(stepOfField(e.field));
        },
      },
    );
  };

  const previewData = preview.isError ? undefined : preview.data;

  return (
    <Grid gutter="lg">
      <Grid.Col span={{ base: 12, lg: 8 }}>
        <Paper withBorder radius="md" p="lg">
          <Stepper
            active={step}
            onStepClick={setStep}
            allowNextStepsSelect
            size="sm"
            mb="xl"
            wrap={false}
          >
            {STEPS.map((label, i) => {
              const unfinished = i < step && stepUnfinished(i);
              return (
                <Stepper.Step
                  key={label}
                  label={label}
                  color={stepErrors(i) ? "red" : unfinished ? "orange" : undefined}
                  completedIcon={unfinished ? i + 1 : undefined}
                  description={
                    stepErrors(i)
                      ? `${stepErrors(i)} to fix`
                      : unfinished
                        ? "not finished"
                        : undefined
                  }
                  data-done={i < step && !unfinished ? "true" : "false"}
                  data-testid={`step-${i}`}
                />
              );
            })}
          </Stepper>

          <Box mih={360}>
            {step === 0 && (
              <Stack gap="lg">
                <Group grow align="flex-start">
                  <TextInput
                    label="Study name"
                    placeholder="NACA polar, Re 3 million"
                    value={form.name}
                    onChange={(e) => update({ name: e.currentTarget.value })}
                    error={errors.name}
                    required
                    data-testid="study-name"
                  />
                </Group>
                <Textarea
                  label="Description"
                  placeholder="What this study is for (optional)"
                  autosize
                  minRows={1}
                  maxRows={4}
                  value={form.description}
                  onChange={(e) => update({ description: e.currentTarget.value })}
                />
                <Stack gap="xs">
                  <Group justify="space-between">
                    <Text fw={600} size="sm">
                      Case
                    </Text>
                    <SegmentedControl
                      size="xs"
                      value={form.source}
                      onChange={(v) => update({ source: v as WizardForm["source"] })}
                      data={[
                        { value: "template", label: "From a template" },
                        { value: "upload", label: "Upload my case" },
                      ]}
                      aria-label="Case source"
                    />
                  </Group>
                  {(errors.template || errors.case) && (
                    <Text c="red" size="sm" role="alert">
                      {errors.template ?? errors.case}
                    </Text>
                  )}
                  {form.source === "template" ? (
                    renderTemplatePicker(form.template, (t) =>
                      setForm((f) =>
                        f.template === t.name
                          ? f
                          : formFromTemplate(t, { name: f.name, description: f.description }),
                      ),
                    )
                  ) : (
                    <UploadDropzone
                      upload={form.upload}
                      onUploaded={(u) =>
                        setForm((f) =>
                          formFromUpload(u, { name: f.name, description: f.description }),
                        )
                      }
                    />
                  )}
                </Stack>
              </Stack>
            )}
            {step === 1 && (
              <ParameterEditor
                form={form}
                update={update}
                errors={errors}
                templateDerived={template?.derived ?? {}}
              />
            )}
            {step === 2 && (
              <RunConfig
                form={form}
                update={update}
                errors={errors}
                packages={packages}
                backends={backends}
                templateSolvers={template ? template.solvers : null}
                preview={previewData}
              />
            )}
            {step === 3 && (
              <Stack gap="xl">
                <div>
                  <Title order={4} mb="xs">
                    Objectives
                  </Title>
                  <ObjectivesEditor form={form} update={update} errors={errors} offered={offered} />
                </div>
                <div>
                  <Title order={4} mb="xs">
                    Convergence policy
                  </Title>
                  <ConvergenceForm form={form} update={update} errors={errors} offered={offered} />
                </div>
              </Stack>
            )}
            {step === 4 && (
              <Stack gap="md">
                <Text size="sm" c="dimmed">
                  This is the study spec the portal receives. The same file works with the CLI and
                  the API.
                </Text>
                <Code
                  block
                  data-testid="spec-yaml"
                  tabIndex={0}
                  aria-label="The study's spec, as YAML"
                  style={{ maxHeight: 360, overflow: "auto" }}
                >
                  {specToYaml(spec)}
                </Code>
                <Group gap="xs">
                  <CopyTextButton value={specToYaml(spec)} label="Copy as YAML" />
                  <CopyTextButton value={specToCurl(spec)} label="Copy as curl" />
                  <Anchor
                    component={Link}
                    to="/settings/tokens"
                    size="sm"
                    data-testid="curl-token-link"
                  >
                    The curl command reads $WINDTUNNEL_TOKEN: make an API token
                  </Anchor>
                </Group>
              </Stack>
            )}
          </Box>

          {save.error !== null && save.error !== undefined && (
            <Alert
              color="red"
              variant="light"
              mt="md"
              icon={<IconAlertTriangle size={16} />}
              role="alert"
              title="Not saved"
            >
              {errorMessage(save.error)}
            </Alert>
          )}

          <Group justify="space-between" mt="xl">
            <Button
              variant="default"
              onClick={() => setStep((s) => Math.max(0, s - 1))}
              disabled={step === 0}
            >
              Back
            </Button>
            <Group gap="xs">
              <Button
                variant="default"
                leftSection={<IconDeviceFloppy size={16} />}
                onClick={() => submit(true)}
                loading={save.isPending && save.variables?.draft === true}
                data-testid="save-draft"
              >
                Save as draft
              </Button>
              {step < STEPS.length - 1 ? (
                <Button onClick={() => setStep((s) => s + 1)} data-testid="next-step">
                  Next: {STEPS[step + 1]}
                </Button>
              ) : (
                <Button
                  leftSection={<IconPlayerPlay size={16} />}
                  onClick={() => submit(false)}
                  loading={save.isPending && save.variables?.draft === false}
                  disabled={!!previewData && !previewData.quota.fits}
                  data-testid="submit-study"
                >
                  Submit{" "}
                  {previewData
                    ? `${plural(previewData.run_count, "run")}${
                        previewData.adaptive ? ` of ≤ ${previewData.adaptive.budget}` : ""
                      }`
                    : "study"}
                </Button>
              )}
            </Group>
          </Group>
        </Paper>
      </Grid.Col>
      <Grid.Col span={{ base: 12, lg: 4 }}>
        <Stack gap="md" style={{ position: "sticky", top: 76 }}>
          <PreviewPanel
            preview={previewData}
            error={preview.isError ? preview.error : null}
            loading={preview.isFetching}
            localProblems={blocking.filter((k) => k in errors).length}
            markedOn={[
              ...new Set(blocking.filter((k) => k in errors).map((k) => STEPS[stepOfField(k)]!)),
            ]}
            waitingFor={blocking.length ? localErrors[blocking[0]!] : undefined}
          />
          {previewData && (
            <Paper withBorder radius="md" p="md">
              <PreviewRows preview={previewData} derivedNames={form.derived.map((d) => d.name)} />
            </Paper>
          )}
        </Stack>
      </Grid.Col>
    </Grid>
  );
}
