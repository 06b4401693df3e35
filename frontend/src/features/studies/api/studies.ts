import { api, unwrap } from "@/lib/api-client";
import type {
  MeshIndependence,
  CaseInspection,
  ContinuedRuns,
  ObjectiveSpec,
  ParameterSpec,
  Pareto,
  Run,
  RunState,
  Sensitivity,
  Study,
  StudyDeletion,
  StudyPlot,
  StudyState,
  StudyContinueRequest,
  StudySurrogate,
  Trust,
  TrustRules,
} from "@/lib/types";
import { runQueryToApi, type RunQuery } from "../lib/run-query";

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
          // a study being deleted is in no list: no filter asks for it
          state: p.state?.length
            ? p.state.filter((x): x is Exclude<StudyState, "deleting"> => x !== "deleting")
            : undefined,
          search: p.search || undefined,
          page: p.page && p.page > 1 ? p.page : undefined,
          page_size: p.pageSize,
        },
      },
    }),
  );
  return data;
}

export async function fetchStudy(id: string): Promise<Study> {
  return await unwrap(api.GET("/api/v1/studies/{id}/", { params: { path: { id } } }));
}

/** A page of a study's runs (`studyId`) or of the runs across studies, as the query asks. */
export async function fetchRunsPage(
  q: RunQuery,
  { studyId, signal }: { studyId?: string | null; signal?: AbortSignal } = {},
): Promise<Page<Run>> {
  const query = runQueryToApi(q);
  const data = studyId
    ? await unwrap(
        api.GET("/api/v1/studies/{id}/runs/", {
          params: { path: { id: studyId }, query: { ...query, study: undefined } },
          signal,
        }),
      )
    : await unwrap(api.GET("/api/v1/runs/", { params: { query }, signal }));
  return data;
}

/** One run (the residual overlay's selection, which may lie on another page). */
export async function fetchRun(id: string): Promise<Run> {
  return await unwrap(api.GET("/api/v1/runs/{id}/", { params: { path: { id } } }));
}

export interface PlotQuery {
  x: string;
  y: string;
  color?: string | null;
  z?: string | null;
  mode?: "auto" | "heatmap";
  state?: RunState[];
  /** the runs table's other filters, as the API spells them (`runFilterToApi`) */
  trust?: string[];
  param?: string[];
  objective?: string[];
  maxPoints?: number;
  bins?: number;
}

/** The objective plot's data, shaped by the server (every point, bins, or a heat map). */
export async function fetchStudyPlot(
  id: string,
  q: PlotQuery,
  { signal }: { signal?: AbortSignal } = {},
): Promise<StudyPlot> {
  const data = await unwrap(
    api.GET("/api/v1/studies/{id}/plot/", {
      params: {
        path: { id },
        query: {
          x: q.x,
          y: q.y,
          color: q.color || undefined,
          z: q.z || undefined,
          mode: q.mode,
          state: q.state?.length ? q.state : undefined,
          trust: q.trust?.length ? (q.trust as Exclude<Trust, "">[]) : undefined,
          param: q.param?.length ? q.param : undefined,
          objective: q.objective?.length ? q.objective : undefined,
          max_points: q.maxPoints,
          bins: q.bins,
        },
      },
      signal,
    }),
  );
  return data;
}

export interface SurrogateQuery {
  x?: string | null;
  y?: string | null;
  size?: number;
  /** the objective whose best run holds the parameters off the map */
  objective?: string | null;
}

/** An adaptive study's surrogate map over two parameters, its sampled points and progress. */
export async function fetchStudySurrogate(
  id: string,
  q: SurrogateQuery,
  { signal }: { signal?: AbortSignal } = {},
): Promise<StudySurrogate> {
  const data = await unwrap(
    api.GET("/api/v1/studies/{id}/surrogate/", {
      params: {
        path: { id },
        query: {
          "grid.x": q.x || undefined,
          "grid.y": q.y || undefined,
          "grid.size": q.size,
          "grid.objective": q.objective || undefined,
        },
      },
      signal,
    }),
  );
  return data;
}

export type MeshKind = "per_direction" | "total" | "size";
/** A mesh's dimensions: what turns a total cell count into a cell size (h = N^(-1/dims)). */
export type MeshDims = 1 | 2 | 3;

/** The grid convergence index of a study's objectives over a refinement parameter. */
export async function fetchMeshIndependence(
  id: string,
  q: { parameter: string; kind: MeshKind; dims?: MeshDims },
  { signal }: { signal?: AbortSignal } = {},
): Promise<MeshIndependence> {
  return await unwrap(
    api.GET("/api/v1/studies/{id}/mesh-independence/", {
      params: {
        path: { id },
        query: { parameter: q.parameter, kind: q.kind, ...(q.dims ? { dims: q.dims } : {}) },
      },
      signal,
    }),
  );
}

/**
 * The first-order and total Sobol indices of a study's objectives (all, or `objective`), with
 * their intervals, on a surrogate fitted to its completed runs; the objectives without enough
 * runs yet are `skipped`.
 */
export async function fetchSensitivity(
  id: string,
  q: { objective?: string | null; samples?: number } = {},
  { signal }: { signal?: AbortSignal } = {},
): Promise<Sensitivity> {
  return await unwrap(
    api.GET("/api/v1/studies/{id}/sensitivity/", {
      params: {
        path: { id },
        query: { objective: q.objective || undefined, samples: q.samples },
      },
      signal,
    }),
  );
}

/**
 * The trade-off between two or three of a study's objectives: `objectives` as
 * "LD:max,Cd:min" (an adaptive study with a pareto goal or constraints has its own), within
 * the `constraint` ranges ("Cl>=0.5"); every completed run's values, which runs are on the
 * front, and its hypervolume (after each batch, for an adaptive study).
 */
export async function fetchPareto(
  id: string,
  q: { objectives?: string | null; constraint?: string[] } = {},
  { signal }: { signal?: AbortSignal } = {},
): Promise<Pareto> {
  return await unwrap(
    api.GET("/api/v1/studies/{id}/pareto/", {
      params: {
        path: { id },
        query: {
          objectives: q.objectives || undefined,
          constraint: q.constraint?.length ? q.constraint : undefined,
        },
      },
      signal,
    }),
  );
}

export async function fetchActiveRuns(): Promise<Page<Run>> {
  const data = await unwrap(
    api.GET("/api/v1/runs/", {
      params: {
        query: { state: ["pending", "admitted", "provisioning", "running"], page_size: 50 },
      },
    }),
  );
  return data;
}

export async function cancelStudy(id: string): Promise<Study> {
  return await unwrap(api.POST("/api/v1/studies/{id}/cancel/", { params: { path: { id } } }));
}

export async function submitStudy(id: string): Promise<Study> {
  return await unwrap(api.POST("/api/v1/studies/{id}/submit/", { params: { path: { id } } }));
}

/**
 * Continue (or restart) a selection of a study's ended runs from their writes: the runs that
 * went on, and those skipped with the reason (400 when none can).
 */
export async function continueStudyRuns(
  id: string,
  body: StudyContinueRequest,
): Promise<ContinuedRuns> {
  return await unwrap(
    api.POST("/api/v1/studies/{id}/runs/continue/", { params: { path: { id } }, body }),
  );
}

/** The tenant's studies being deleted, with how many of their runs are gone so far. */
export async function fetchStudyDeletions(): Promise<StudyDeletion[]> {
  return await unwrap(api.GET("/api/v1/studies/deletions/"));
}

export async function deleteStudy(id: string): Promise<void> {
  await unwrap(api.DELETE("/api/v1/studies/{id}/", { params: { path: { id } } }));
}

export async function cloneStudy(id: string, name?: string): Promise<Study> {
  return await unwrap(
    api.POST("/api/v1/studies/{id}/clone/", {
      params: { path: { id } },
      body: name ? { name } : {},
    }),
  );
}

export async function extendStudy(
  id: string,
  parameters: Record<string, ParameterSpec>,
): Promise<Study> {
  return await unwrap(
    api.POST("/api/v1/studies/{id}/extend/", {
      params: { path: { id } },
      body: { parameters },
    }),
  );
}

/** What the study's case will do (its upload's or template's inspection), or null. */
export async function fetchStudyInspection(study: Study): Promise<CaseInspection | null> {
  if (study.case) {
    const upload = await unwrap(
      api.GET("/api/v1/uploads/{id}/", { params: { path: { id: study.case } } }),
    );
    return upload.inspection ?? null;
  }
  if (study.template) {
    const templates = await unwrap(api.GET("/api/v1/templates/"));
    return templates.find((t) => t.name === study.template)?.inspection ?? null;
  }
  return null;
}

export type { TrustRules };

/** Replace a study's objectives; its finished runs are recomputed from their series. */
export async function updateStudyObjectives(
  id: string,
  objectives: Record<string, ObjectiveSpec>,
  trust?: TrustRules,
): Promise<Study> {
  return await unwrap(
    api.PUT("/api/v1/studies/{id}/objectives/", {
      params: { path: { id } },
      body: {
        objectives,
        ...(trust ? { trust } : {}),
      },
    }),
  );
}
