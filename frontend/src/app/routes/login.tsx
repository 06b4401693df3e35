import { Anchor, Center, Paper, Stack, Text, Title } from "@mantine/core";
import { Navigate, useNavigate, useSearchParams } from "react-router";
import { LoadingState } from "@/components/states";
import { LoginForm, useMe } from "@/features/auth";
import { Logo } from "../logo";

function safeNext(next: string | null): string {
  // only paths of this app: never an absolute URL (open redirect)
  return next && next.startsWith("/") && !next.startsWith("//") ? next : "/";
}

export function LoginPage() {
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const me = useMe();
  const next = safeNext(params.get("next"));
  if (me.isPending) return <LoadingState h={400} />;
  if (me.data) return <Navigate to={next} replace />;
  return (
    <Center mih="100vh" p="md" bg="var(--mantine-color-default-hover)">
      <Stack w="100%" maw={400} gap="lg">
        <Center>
          <Logo size={36} />
        </Center>
        <Paper withBorder shadow="xs" p="xl" radius="md">
          <Title order={3} mb={4}>
            Sign in
          </Title>
          <Text size="sm" c="dimmed" mb="lg">
            Parametric OpenFOAM studies within your tenant's quota.
          </Text>
          <LoginForm onSignedIn={() => navigate(next, { replace: true })} />
        </Paper>
        <Text size="xs" c="dimmed" ta="center">
          Scripts and the CLI use API tokens: see the{" "}
          <Anchor href="/api/docs/" size="xs" underline="always">
            API documentation
          </Anchor>
          .
        </Text>
      </Stack>
    </Center>
  );
}
