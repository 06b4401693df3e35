import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import {
  createWebhook,
  deleteWebhook,
  fetchDeliveries,
  fetchEmailPreference,
  fetchWebhooks,
  saveEmailPreference,
  testWebhook,
  updateWebhook,
  type EmailPreferenceUpdate,
  type WebhookCreateRequest,
} from "../api/notifications";

export const notificationKeys = {
  webhooks: ["notifications", "webhooks"] as const,
  deliveries: (id: string) => ["notifications", "webhooks", id, "deliveries"] as const,
  email: ["notifications", "email"] as const,
};

export function useWebhooks() {
  return useQuery({
    queryKey: notificationKeys.webhooks,
    queryFn: fetchWebhooks,
    staleTime: 10_000,
  });
}

export function useDeliveries(id: string | null) {
  return useQuery({
    queryKey: notificationKeys.deliveries(id ?? ""),
    queryFn: () => fetchDeliveries(id ?? ""),
    enabled: !!id,
    staleTime: 5_000,
  });
}

export function useCreateWebhook() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: WebhookCreateRequest) => createWebhook(body),
    onSuccess: () => qc.invalidateQueries({ queryKey: notificationKeys.webhooks }),
  });
}

export function useToggleWebhook() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: ({ id, active }: { id: string; active: boolean }) => updateWebhook(id, { active }),
    onSuccess: () => qc.invalidateQueries({ queryKey: notificationKeys.webhooks }),
  });
}

export function useDeleteWebhook() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (id: string) => deleteWebhook(id),
    onSuccess: () => qc.invalidateQueries({ queryKey: notificationKeys.webhooks }),
  });
}

export function useTestWebhook() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (id: string) => testWebhook(id),
    onSuccess: (_, id) => qc.invalidateQueries({ queryKey: notificationKeys.deliveries(id) }),
  });
}

export function useEmailPreference() {
  return useQuery({
    queryKey: notificationKeys.email,
    queryFn: fetchEmailPreference,
    staleTime: 30_000,
  });
}

export function useSaveEmailPreference() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: EmailPreferenceUpdate) => saveEmailPreference(body),
    onSuccess: (data) => qc.setQueryData(notificationKeys.email, data),
  });
}
