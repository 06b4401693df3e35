import createClient, { type Middleware } from "openapi-fetch";
import type { paths } from "@/generated/api";
import { env } from "./env";

/** Every API error is JSON `{code, message, field, details}` (core/exceptions.py). */
export interface ErrorBody {
  code: string;
  message: string;
  field: string | null;
  details?: unknown;
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field: string | null;
  readonly details: unknown;

  constructor(status: number, body: Partial<ErrorBody> | undefined, fallback: string) {
    super(body?.message || fallback);
    this.name = "ApiError";
    this.status = status;
    this.code = body?.code ?? "error";
    this.field = body?.field ?? null;
    this.details = body?.details;
  }

  get isNotFound() {
    return this.status === 404;
  }

  get isUnauthenticated() {
    return this.status === 401 || (this.status === 403 && this.code === "not_authenticated");
  }
}

export function errorMessage(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof TypeError) return "The server cannot be reached. Check your connection.";
  if (error instanceof Error) return error.message;
  return "Something went wrong.";
}

export function readCookie(name: string): string | null {
  const match = document.cookie.split("; ").find((c) => c.startsWith(`${name}=`));
  return match ? decodeURIComponent(match.slice(name.length + 1)) : null;
}

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** Django's CSRF protection: send the csrftoken cookie back as a header on writes. */
export const csrfMiddleware: Middleware = {
  onRequest({ request }) {
    if (UNSAFE.has(request.method)) {
      const token = readCookie("csrftoken");
      if (token) request.headers.set("X-CSRFToken", token);
    }
    return request;
  },
};

/** Listeners told when a request comes back 401/403-unauthenticated (the session ended). */
const sessionListeners = new Set<() => void>();
export function onSessionExpired(listener: () => void): () => void {
  sessionListeners.add(listener);
  return () => sessionListeners.delete(listener);
}

const sessionMiddleware: Middleware = {
  async onResponse({ response, request }) {
    const url = new URL(request.url, window.location.origin);
    if (url.pathname.startsWith("/api/v1/auth/")) return response;
    if (response.status === 401 || response.status === 403) {
      const body = (await response
        .clone()
        .json()
        .catch(() => null)) as ErrorBody | null;
      if (response.status === 401 || body?.code === "not_authenticated") {
        sessionListeners.forEach((l) => l());
      }
    }
    return response;
  },
};

export const api = createClient<paths>({
  baseUrl: env.apiBase || window.location.origin,
  // looked up per call, so tests can stub globalThis.fetch
  fetch: (request: Request) => globalThis.fetch(request),
  credentials: "same-origin",
  headers: { Accept: "application/json" },
});
api.use(csrfMiddleware, sessionMiddleware);

/**
 * Turn an openapi-fetch result into its data or a thrown ApiError, so TanStack Query sees
 * failures as errors.
 */
export async function unwrap<T>(
  promise: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  const { data, error, response } = await promise;
  if (!response.ok) {
    const body = error && typeof error === "object" ? (error as Partial<ErrorBody>) : undefined;
    throw new ApiError(response.status, body, fallbackMessage(response.status));
  }
  return data as T;
}

function fallbackMessage(status: number): string {
  if (status >= 500)
    return `The server failed to answer (${status}). Try again in a moment; if it keeps failing, an operator can check the server log.`;
  if (status === 404) return "Not found, or it belongs to another tenant.";
  if (status === 401) return "Your session has ended: sign in again.";
  if (status === 403) return "You are not allowed to do this.";
  return `The request failed (${status}).`;
}

/** Absolute URL of an API path (downloads, copy-as-curl). */
export function apiUrl(path: string): string {
  return `${env.apiBase || window.location.origin}${path}`;
}

/** Make sure the csrftoken cookie exists before the first write (the sign-in form). */
export async function ensureCsrfCookie(): Promise<void> {
  if (readCookie("csrftoken")) return;
  await unwrap(api.GET("/api/v1/auth/csrf/"));
}
