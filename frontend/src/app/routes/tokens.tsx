import { Stack } from "@mantine/core";
import { PageHeader } from "@/components/page-header";
import { ApiTokens } from "@/features/tokens";

/** /settings/tokens: the signed-in user's API tokens (docs/api.md, "Tokens"). */
export function TokensPage() {
  return (
    <Stack gap={0} maw={960}>
      <PageHeader
        title="API tokens"
        subtitle="For scripts, the windtunnel command and copied curl commands. Each acts as you; revoke one you no longer use."
      />
      <ApiTokens />
    </Stack>
  );
}
