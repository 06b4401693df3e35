import type { components } from "@/generated/api";
import { api, ensureCsrfCookie, unwrap } from "@/lib/api-client";

type Schemas = components["schemas"];
export type Webhook = Schemas["Webhook"];
export type WebhookCreated = Schemas["WebhookCreated"];
export type WebhookCreateRequest = Schemas["WebhookCreateRequest"];
export type Delivery = Schemas["Delivery"];
export type EmailPreference = Schemas["EmailPreference"];
export type EmailPreferenceUpdate = Schemas["EmailPreferenceUpdateRequest"];
export type NotificationEvent = Schemas["SubscribableEventEnum"];

export const EVENTS: { value: NotificationEvent; label: string }[] = [
  { value: "study.completed", label: "Study completed" },
  { value: "study.completed_with_failures", label: "Study completed with failures" },
  { value: "study.cancelled", label: "Study cancelled" },
  { value: "run.failed", label: "Run failed" },
  { value: "run.diverged", label: "Run diverged" },
];

export async function fetchWebhooks(): Promise<Webhook[]> {
  const page = await unwrap(
    api.GET("/api/v1/notifications/webhooks/", { params: { query: { page_size: 100 } } }),
  );
  return page.results;
}

export async function createWebhook(body: WebhookCreateRequest): Promise<WebhookCreated> {
  await ensureCsrfCookie();
  return unwrap(api.POST("/api/v1/notifications/webhooks/", { body }));
}

export async function updateWebhook(
  id: string,
  body: Schemas["PatchedWebhookUpdateRequest"],
): Promise<Webhook> {
  await ensureCsrfCookie();
  return unwrap(
    api.PATCH("/api/v1/notifications/webhooks/{id}/", { params: { path: { id } }, body }),
  );
}

export async function deleteWebhook(id: string): Promise<void> {
  await ensureCsrfCookie();
  await unwrap(api.DELETE("/api/v1/notifications/webhooks/{id}/", { params: { path: { id } } }));
}

export async function testWebhook(id: string): Promise<Delivery> {
  await ensureCsrfCookie();
  return unwrap(
    api.POST("/api/v1/notifications/webhooks/{id}/test/", { params: { path: { id } } }),
  );
}

export async function fetchDeliveries(id: string): Promise<Delivery[]> {
  const page = await unwrap(
    api.GET("/api/v1/notifications/webhooks/{id}/deliveries/", {
      params: { path: { id }, query: { page_size: 50 } },
    }),
  );
  return page.results;
}

export function fetchEmailPreference(): Promise<EmailPreference> {
  return unwrap(api.GET("/api/v1/notifications/email/"));
}

export async function saveEmailPreference(body: EmailPreferenceUpdate): Promise<EmailPreference> {
  await ensureCsrfCookie();
  return unwrap(api.PUT("/api/v1/notifications/email/", { body }));
}
