import { ApiError } from "@/lib/api-client";

/**
 * The API's message for one form field: its errors are `{code, message, field}`, the field
 * named as the request names it (`cores`, `quota.cores`, `settings.host`).
 */
export function fieldError(error: unknown, field: string): string | undefined {
  if (!(error instanceof ApiError) || !error.field) return undefined;
  const f = error.field;
  return f === field || f.endsWith(`.${field}`) || f.startsWith(`${field}.`)
    ? error.message
    : undefined;
}
