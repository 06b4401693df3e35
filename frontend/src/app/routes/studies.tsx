import {
  Button,
  Card,
  Group,
  MultiSelect,
  Pagination,
  Skeleton,
  Stack,
  Text,
  TextInput,
} from "@mantine/core";
import { useDebouncedValue } from "@mantine/hooks";
import { IconPlus, IconSearch } from "@/components/icons";
import { useEffect, useState } from "react";
import { Link, useSearchParams } from "react-router";
import { PageHeader } from "@/components/page-header";
import { usePatchSearchParams } from "@/lib/search-params";
import { STUDY_STATES, studyStateLabel } from "@/lib/states";
import { EmptyState, ErrorState } from "@/components/states";
import { StudiesTable, StudyDeletions, useStudies, useStudyDeletions } from "@/features/studies";
import type { StudyState } from "@/lib/types";

const PAGE_SIZE = 25;

export function StudiesPage() {
  const [params] = useSearchParams();
  const state = (params.get("state")?.split(",").filter(Boolean) ?? []) as StudyState[];
  const page = Math.max(1, Number(params.get("page")) || 1);
  const [search, setSearch] = useState(params.get("q") ?? "");
  const [debounced] = useDebouncedValue(search, 300);

  const set = usePatchSearchParams();

  useEffect(() => {
    if ((params.get("q") ?? "") !== debounced) set({ q: debounced || null, page: null });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [debounced]);

  const studies = useStudies({ state, search: debounced, page, pageSize: PAGE_SIZE });
  const deletions = useStudyDeletions();
  const filtered = state.length > 0 || !!debounced;
  const pages = studies.data ? Math.max(1, Math.ceil(studies.data.count / PAGE_SIZE)) : 1;

  return (
    <>
      <PageHeader
        title="Studies"
        crumbs={[{ label: "Studies" }]}
        actions={
          <Button component={Link} to="/studies/new" leftSection={<IconPlus size={16} />}>
            New study
          </Button>
        }
      />
      <StudyDeletions deletions={deletions.data} />
      <Card padding="md">
        <Group mb="md" gap="sm" wrap="wrap">
          <TextInput
            placeholder="Search by name"
            leftSection={<IconSearch size={16} />}
            value={search}
            onChange={(e) => setSearch(e.currentTarget.value)}
            w={{ base: "100%", sm: 280 }}
            aria-label="Search studies by name"
          />
          <MultiSelect
            placeholder={state.length ? undefined : "Any state"}
            data={STUDY_STATES.map((s) => ({ value: s, label: studyStateLabel(s) }))}
            value={state}
            onChange={(v) => set({ state: v.join(",") || null, page: null })}
            clearable
            w={{ base: "100%", sm: 360 }}
            aria-label="Filter by state"
          />
          {studies.data && (
            <Text size="sm" c="dimmed" ml="auto">
              {studies.data.count} {studies.data.count === 1 ? "study" : "studies"}
            </Text>
          )}
        </Group>
        {studies.isError ? (
          <ErrorState error={studies.error} onRetry={() => studies.refetch()} />
        ) : !studies.data ? (
          <Stack gap="xs">
            {Array.from({ length: 6 }, (_, i) => (
              <Skeleton key={i} h={52} />
            ))}
          </Stack>
        ) : studies.data.results.length === 0 ? (
          filtered ? (
            <EmptyState
              title="No study matches"
              action={
                <Button
                  variant="light"
                  size="xs"
                  onClick={() => {
                    setSearch("");
                    set({ q: null, state: null, page: null });
                  }}
                >
                  Clear the filters
                </Button>
              }
            >
              Nothing found for these filters.
            </EmptyState>
          ) : (
            <EmptyState
              title="No studies yet"
              action={
                <Button component={Link} to="/studies/new" size="xs">
                  Create a study
                </Button>
              }
            >
              Studies you and your team create appear here.
            </EmptyState>
          )
        ) : (
          <Stack gap="md" style={{ opacity: studies.isPlaceholderData ? 0.6 : 1 }}>
            <StudiesTable studies={studies.data.results} />
            {pages > 1 && (
              <Group justify="center">
                <Pagination
                  total={pages}
                  value={page}
                  onChange={(p) => set({ page: p > 1 ? String(p) : null })}
                />
              </Group>
            )}
          </Stack>
        )}
      </Card>
    </>
  );
}
