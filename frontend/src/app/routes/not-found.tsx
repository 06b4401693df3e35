import { Button, Center, Stack, Text, Title } from "@mantine/core";
import { isRouteErrorResponse, Link, useRouteError } from "react-router";
import { errorMessage } from "@/lib/api-client";

export function NotFoundPage({ what = "page" }: { what?: string }) {
  return (
    <Center py={80}>
      <Stack align="center" gap="sm" maw={440}>
        <Title order={2}>Not found</Title>
        <Text c="dimmed" ta="center" data-testid="not-found">
          There is no such {what}, or it belongs to another tenant.
        </Text>
        <Button component={Link} to="/" variant="light">
          Back to the dashboard
        </Button>
      </Stack>
    </Center>
  );
}

export function RouteError() {
  const error = useRouteError();
  return (
    <Center py={80}>
      <Stack align="center" gap="sm" maw={520}>
        <Title order={2}>Something broke on this page</Title>
        <Text c="dimmed" ta="center">
          {isRouteErrorResponse(error)
            ? `${error.status} ${error.statusText}`
            : errorMessage(error)}
        </Text>
        <Button onClick={() => window.location.reload()} variant="light">
          Reload
        </Button>
      </Stack>
    </Center>
  );
}
