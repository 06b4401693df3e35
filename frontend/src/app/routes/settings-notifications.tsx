import { Stack } from "@mantine/core";
import { PageHeader } from "@/components/page-header";
import { useMe } from "@/features/auth";
import { NotificationSettings } from "@/features/notifications";

export function NotificationSettingsPage() {
  const me = useMe();
  return (
    <Stack gap="lg" maw={980}>
      <PageHeader
        title="Notifications"
        crumbs={[{ label: "Settings" }, { label: "Notifications" }]}
      />
      <NotificationSettings isAdmin={!!me.data?.is_admin} />
    </Stack>
  );
}
