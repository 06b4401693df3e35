import { Alert, Button, Grid, Skeleton, Stack } from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { useQuery } from "@tanstack/react-query";
import { useMemo } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import { PageHeader } from "@/components/page-header";
import { ErrorState } from "@/components/states";
import { TemplateCards, useBackends, usePackages, useTemplates } from "@/features/catalog";
import { useStudy } from "@/features/studies";
import {
  emptyForm,
  fetchUpload,
  formFromSpec,
  formFromTemplate,
  StudyWizard,
} from "@/features/wizard";
import type { Study } from "@/lib/types";
import { NotFoundPage } from "./not-found";
import { plural } from "@/lib/format";

function useCatalog() {
  const templates = useTemplates();
  const packages = usePackages();
  const backends = useBackends();
  const error = templates.error ?? packages.error ?? backends.error;
  const ready = templates.data && packages.data && backends.data;
  return {
    templates: templates.data,
    packages: packages.data,
    backends: backends.data,
    error,
    ready: !!ready,
    retry: () => {
      void templates.refetch();
      void packages.refetch();
      void backends.refetch();
    },
  };
}

function WizardSkeleton() {
  return (
    <Grid gutter="lg">
      <Grid.Col span={{ base: 12, lg: 8 }}>
        <Skeleton h={520} radius="md" />
      </Grid.Col>
      <Grid.Col span={{ base: 12, lg: 4 }}>
        <Skeleton h={240} radius="md" />
      </Grid.Col>
    </Grid>
  );
}

function useOnSaved() {
  const navigate = useNavigate();
  return (study: Study, draft: boolean) => {
    notifications.show({
      color: "teal",
      message: draft
        ? `Draft "${study.name}" saved`
        : `"${study.name}" submitted: ${plural(study.run_count ?? 0, "run")} queued`,
    });
    navigate(`/studies/${study.id}`);
  };
}

export function NewStudyPage() {
  const [params] = useSearchParams();
  const catalog = useCatalog();
  const onSaved = useOnSaved();
  const templateName = params.get("template");
  const initial = useMemo(() => {
    const t = catalog.templates?.find((x) => x.name === templateName);
    return t ? formFromTemplate(t) : emptyForm();
  }, [catalog.templates, templateName]);

  return (
    <>
      <PageHeader
        title="New study"
        crumbs={[{ label: "Studies", to: "/studies" }, { label: "New study" }]}
        subtitle="Pick a case, mark what varies, choose resources, and see what it costs of your quota before you submit."
      />
      {catalog.error ? (
        <ErrorState
          error={catalog.error}
          title="The catalog could not be loaded"
          onRetry={catalog.retry}
        />
      ) : !catalog.ready ? (
        <WizardSkeleton />
      ) : (
        <StudyWizard
          key={templateName ?? "none"}
          templates={catalog.templates!}
          packages={catalog.packages!}
          backends={catalog.backends!}
          initial={initial}
          editId={null}
          renderTemplatePicker={(selected, onSelect) => (
            <TemplateCards selected={selected} onSelect={onSelect} />
          )}
          onSaved={onSaved}
        />
      )}
    </>
  );
}

export function EditStudyPage() {
  const { id = "" } = useParams();
  const study = useStudy(id);
  const catalog = useCatalog();
  const onSaved = useOnSaved();
  const caseId = study.data?.spec.case;
  const upload = useQuery({
    queryKey: ["uploads", caseId],
    queryFn: () => fetchUpload(caseId!),
    enabled: !!caseId,
    staleTime: 60_000,
  });

  if (study.isError && (study.error as { status?: number }).status === 404)
    return <NotFoundPage what="study" />;
  const title = study.data ? `Edit ${study.data.name}` : "Edit draft";
  const crumbs = [
    { label: "Studies", to: "/studies" },
    ...(study.data ? [{ label: study.data.name, to: `/studies/${id}` }] : []),
    { label: "Edit" },
  ];
  let body;
  if (study.isError || catalog.error) {
    body = (
      <ErrorState
        error={study.error ?? catalog.error}
        onRetry={() => (study.refetch(), catalog.retry())}
      />
    );
  } else if (!study.data || !catalog.ready || (caseId && upload.isPending)) {
    body = <WizardSkeleton />;
  } else if (study.data.state !== "draft") {
    body = (
      <Alert color="yellow" title="Only drafts can be edited">
        <Stack gap="xs" align="flex-start">
          This study was submitted. Clone it to change its spec, or extend it with new values.
          <Button component={Link} to={`/studies/${id}`} size="xs" variant="light">
            Back to the study
          </Button>
        </Stack>
      </Alert>
    );
  } else {
    const template = catalog.templates!.find((t) => t.name === study.data!.spec.template);
    body = (
      <StudyWizard
        templates={catalog.templates!}
        packages={catalog.packages!}
        backends={catalog.backends!}
        initial={formFromSpec(study.data.spec, template, upload.data ?? null)}
        editId={id}
        renderTemplatePicker={(selected, onSelect) => (
          <TemplateCards selected={selected} onSelect={onSelect} />
        )}
        onSaved={onSaved}
      />
    );
  }
  return (
    <>
      <PageHeader title={title} crumbs={crumbs} />
      {body}
    </>
  );
}
