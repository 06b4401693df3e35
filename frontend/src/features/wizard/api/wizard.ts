import { api, ApiError, readCookie, unwrap, type ErrorBody, apiUrl } from "@/lib/api-client";
import type { Preview, Study, StudySpec, Upload } from "@/lib/types";

export async function previewSpec(spec: StudySpec, signal?: AbortSignal): Promise<Preview> {
  return await unwrap(api.POST("/api/v1/studies/preview/", { body: spec, signal }));
}

export async function createStudy(spec: StudySpec, draft: boolean): Promise<Study> {
  return await unwrap(api.POST("/api/v1/studies/", { body: { ...spec, draft } }));
}

export async function updateStudy(id: string, spec: StudySpec): Promise<Study> {
  return await unwrap(api.PUT("/api/v1/studies/{id}/", { params: { path: { id } }, body: spec }));
}

export async function fetchUpload(id: string): Promise<Upload> {
  return unwrap(api.GET("/api/v1/uploads/{id}/", { params: { path: { id } } }));
}

/**
 * Upload a case archive with progress (fetch cannot report upload progress; XHR can).
 * Errors carry the server's {code, message, field, details: {entry}}.
 */
export function uploadCase(
  file: File,
  onProgress: (fraction: number) => void,
  signal?: AbortSignal,
): Promise<Upload> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", apiUrl("/api/v1/uploads/"));
    xhr.withCredentials = true;
    xhr.setRequestHeader("Accept", "application/json");
    const token = readCookie("csrftoken");
    if (token) xhr.setRequestHeader("X-CSRFToken", token);
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total);
    };
    xhr.onload = () => {
      let body: unknown = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        /* not JSON */
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body as Upload);
      else
        reject(
          new ApiError(
            xhr.status,
            (body ?? undefined) as Partial<ErrorBody> | undefined,
            xhr.status === 413
              ? "The archive is too large for this server."
              : `Upload failed (${xhr.status})`,
          ),
        );
    };
    xhr.onerror = () => reject(new TypeError("network error"));
    xhr.onabort = () => reject(new DOMException("aborted", "AbortError"));
    signal?.addEventListener("abort", () => xhr.abort());
    const data = new FormData();
    data.append("file", file);
    xhr.send(data);
  });
}

export async function submitStudy(id: string): Promise<Study> {
  return await unwrap(api.POST("/api/v1/studies/{id}/submit/", { params: { path: { id } } }));
}
