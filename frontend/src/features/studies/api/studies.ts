import { api, unwrap } from "@/lib/api-client";
import type { ParameterSpec, Run, RunState, Study, StudyState } from "@/lib/types";

export interface StudyListParams {
  state?: StudyState[];
  search?: string;
  page?: number;
  pageSize?: number;
}

export interface Page<T> {
  count: number;
  results: T[];
}

export async function fetchStudies(p: StudyListParams): Promise<Page<Study>> {
  const data = await unwrap(
    api.GET("/api/v1/studies/", {
      params: {
        query: {
          state: p.state?.length ? p.state : undefined,
          search: p.search || undefined,
          page: p.page && p.page > 1 ? p.page : undefined,
          page_size: p.pageSize,
        },
      },
    }),
  );
  return data as unknown as Page<Study>;
}

export async function fetchStudy(id: string): Promise<Study> {
  return (await unwrap(
    api.GET("/api/v1/studies/{id}/", { params: { path: { id } } }),
  )) as unknown as Study;
}

const RUNS_PAGE = 1000; // the API's maximum page size

/**
 * Every run of a study, in index order: the first page tells the count, the rest load in
 * parallel (a 10,000-run study is ten requests).
 */
export async function fetchAllRuns(
  id: string,
  { state, signal }: { state?: RunState[]; signal?: AbortSignal } = {},
): Promise<Run[]> {
  const page = (n: number) =>
    unwrap(
      api.GET("/api/v1/studies/{id}/runs/", {
        params: {
          path: { id },
          query: { page: n, page_size: RUNS_PAGE, state: state?.length ? state : undefined },
        },
        signal,
      }),
    ) as unknown as Promise<Page<Run>>;
  const first = await page(1);
  const pages = Math.ceil(first.count / RUNS_PAGE);
  if (pages <= 1) return first.results;
  const rest: Page<Run>[] = [];
  const numbers = Array.from({ length: pages - 1 }, (_, i) => i + 2);
  for (let i = 0; i < numbers.length; i += 4) {
    rest.push(...(await Promise.all(numbers.slice(i, i + 4).map(page))));
  }
  return [first, ...rest].flatMap((p) => p.results);
}

export async function fetchActiveRuns(): Promise<Page<Run>> {
  const data = await unwrap(
    api.GET("/api/v1/runs/", {
      params: {
        query: { state: ["pending", "admitted", "provisioning", "running"], page_size: 50 },
      },
    }),
  );
  return data as unknown as Page<Run>;
}

export async function cancelStudy(id: string): Promise<Study> {
  return (await unwrap(
    api.POST("/api/v1/studies/{id}/cancel/", { params: { path: { id } } }),
  )) as unknown as Study;
}

export async function submitStudy(id: string): Promise<Study> {
  return (await unwrap(
    api.POST("/api/v1/studies/{id}/submit/", { params: { path: { id } } }),
  )) as unknown as Study;
}

export async function deleteStudy(id: string): Promise<void> {
  await unwrap(api.DELETE("/api/v1/studies/{id}/", { params: { path: { id } } }));
}

export async function cloneStudy(id: string, name?: string): Promise<Study> {
  return (await unwrap(
    api.POST("/api/v1/studies/{id}/clone/", {
      params: { path: { id } },
      body: name ? { name } : {},
    }),
  )) as unknown as Study;
}

export async function extendStudy(
  id: string,
  parameters: Record<string, ParameterSpec>,
): Promise<Study> {
  return (await unwrap(
    api.POST("/api/v1/studies/{id}/extend/", {
      params: { path: { id } },
      body: { parameters },
    }),
  )) as unknown as Study;
}
