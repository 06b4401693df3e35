import { Card } from "@mantine/core";
import { useMemo } from "react";
import { PageHeader } from "@/components/page-header";
import { useBackends } from "@/features/catalog";
import {
  runsPageState,
  RunsTable,
  useRunQueryInUrl,
  useRunsPage,
  useStudies,
} from "@/features/studies";
import { splitParameters } from "@/lib/spec";

/**
 * Every run of the tenant across studies, a page at a time (`/runs?state=running,pending&
 * study=…&backend=…&sort=-queued_at&page=2`): the dashboard's "All runs" link lands here.
 * With one study chosen, its parameters and objectives become columns and range filters.
 */
export function RunsPage() {
  const [query, setQuery] = useRunQueryInUrl();
  const runs = useRunsPage(query);
  const studies = useStudies({ pageSize: 100 }, { live: false });
  const backends = useBackends();

  const chosen = studies.data?.results.find((s) => s.id === query.study);
  const parameters = useMemo(() => (chosen ? splitParameters(chosen.spec).varied : []), [chosen]);
  const objectives = useMemo(() => Object.keys(chosen?.objectives ?? {}), [chosen]);
  const studyOptions = useMemo(() => {
    const options = (studies.data?.results ?? []).map((s) => ({ value: s.id, label: s.name }));
    if (query.study && !options.some((o) => o.value === query.study))
      options.unshift({ value: query.study, label: "the chosen study" });
    return options;
  }, [studies.data, query.study]);

  return (
    <>
      <PageHeader
        title="Runs"
        subtitle="Every run of your tenant's studies: filter by state, study, backend or trust, sort by any column."
      />
      <Card padding="md">
        <RunsTable
          {...runsPageState(runs)}
          query={query}
          onQueryChange={setQuery}
          parameters={parameters}
          objectives={objectives}
          acrossStudies
          studies={studyOptions}
          backends={(backends.data ?? []).map((b) => b.name)}
          height={640}
        />
      </Card>
    </>
  );
}
