import {
  AppShell,
  Avatar,
  Burger,
  Group,
  Menu,
  NavLink,
  ScrollArea,
  Stack,
  Text,
  UnstyledButton,
} from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import {
  IconChevronDown,
  IconFlask,
  IconLayoutDashboard,
  IconListDetails,
  IconLogout,
  IconPlayerPlay,
  IconPlus,
  IconServerCog,
  IconBook,
  IconBell,
  IconKey,
} from "@/components/icons";
import { useQueryClient } from "@tanstack/react-query";
import { useEffect } from "react";
import { Link, Navigate, Outlet, useLocation, useNavigate } from "react-router";
import { LoadingState, ErrorState } from "@/components/states";
import { useLogout, useMe, meQueryKey } from "@/features/auth";
import { QuotaLine } from "@/features/quotas";
import { onSessionExpired } from "@/lib/api-client";
import { loadPlotly } from "@/lib/plotly";
import { Logo } from "./logo";

const NAV = [
  { to: "/", label: "Dashboard", icon: IconLayoutDashboard, exact: true },
  { to: "/studies", label: "Studies", icon: IconListDetails, exact: false },
  { to: "/runs", label: "Runs", icon: IconPlayerPlay, exact: false },
  { to: "/studies/new", label: "New study", icon: IconPlus, exact: true },
];

/** Signed-in pages: header, navigation, and a redirect to /login without a session. */
export function AppLayout() {
  const me = useMe();
  const location = useLocation();
  const navigate = useNavigate();
  const qc = useQueryClient();
  const logout = useLogout();
  const [opened, { toggle, close }] = useDisclosure(false);

  useEffect(() => onSessionExpired(() => qc.setQueryData(meQueryKey, null)), [qc]);
  useEffect(close, [location.pathname, close]);
  // fetch the plotting library while the user reads, so the first plot appears at once
  useEffect(() => {
    if (!me.data) return;
    const idle = window.requestIdleCallback ?? ((f: () => void) => window.setTimeout(f, 1500));
    idle(() => void loadPlotly().catch(() => {}));
  }, [me.data]);

  if (me.isPending) return <LoadingState label="Signing you in…" h={400} />;
  if (me.isError)
    return (
      <Stack p="xl" maw={560} mx="auto" mt="xl">
        <ErrorState
          error={me.error}
          title="The portal cannot be reached"
          onRetry={() => me.refetch()}
        />
      </Stack>
    );
  if (!me.data) {
    const next = location.pathname + location.search;
    return (
      <Navigate to={next === "/" ? "/login" : `/login?next=${encodeURIComponent(next)}`} replace />
    );
  }
  const user = me.data;
  const isActive = (to: string, exact: boolean) =>
    exact
      ? location.pathname === to
      : location.pathname.startsWith(to) && location.pathname !== "/studies/new";

  return (
    <AppShell
      header={{ height: 56 }}
      navbar={{ width: 220, breakpoint: "sm", collapsed: { mobile: !opened } }}
      padding="lg"
    >
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="sm" wrap="nowrap">
            <Burger
              opened={opened}
              onClick={toggle}
              hiddenFrom="sm"
              size="sm"
              aria-label="Toggle navigation"
            />
            <Link
              to="/"
              style={{ textDecoration: "none", color: "inherit" }}
              aria-label="Windtunnel home"
            >
              <Logo />
            </Link>
          </Group>
          <Menu position="bottom-end" withinPortal>
            <Menu.Target>
              <UnstyledButton data-testid="account-menu" title="Account menu">
                <Group gap={8} wrap="nowrap">
                  <Avatar size={30} radius="xl" color="wind">
                    {user.username.slice(0, 2).toUpperCase()}
                  </Avatar>
                  <Stack gap={0} visibleFrom="xs">
                    <Text size="sm" fw={600} lh={1.2}>
                      {user.username}
                    </Text>
                    <Text size="xs" c="dimmed" lh={1.2} data-testid="tenant-name">
                      {user.tenant}
                    </Text>
                  </Stack>
                  <IconChevronDown size={14} />
                </Group>
              </UnstyledButton>
            </Menu.Target>
            <Menu.Dropdown>
              <Menu.Label>
                {user.tenant} · {user.is_admin ? "tenant admin" : "member"}
              </Menu.Label>
              <Menu.Item
                component={Link}
                to="/settings/tokens"
                leftSection={<IconKey size={14} />}
                data-testid="api-tokens-link"
              >
                API tokens
              </Menu.Item>
              <Menu.Item
                component={Link}
                to="/settings/notifications"
                leftSection={<IconBell size={14} />}
                data-testid="notifications-link"
              >
                Notifications
              </Menu.Item>
              <Menu.Item component="a" href="/api/docs/" leftSection={<IconBook size={14} />}>
                API documentation
              </Menu.Item>
              <Menu.Divider />
              <Menu.Item
                leftSection={<IconLogout size={14} />}
                onClick={() => logout.mutate(undefined, { onSettled: () => navigate("/login") })}
                data-testid="sign-out"
              >
                Sign out
              </Menu.Item>
            </Menu.Dropdown>
          </Menu>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs">
        <AppShell.Section grow component={ScrollArea}>
          <Stack gap={2}>
            {NAV.map((item) => (
              <NavLink
                key={item.to}
                component={Link}
                to={item.to}
                label={item.label}
                leftSection={<item.icon size={18} stroke={1.6} />}
                active={isActive(item.to, item.exact)}
                variant="light"
              />
            ))}
            {user.is_staff && (
              <NavLink
                component={Link}
                to="/operations"
                label="Admin"
                leftSection={<IconServerCog size={18} stroke={1.6} />}
                active={location.pathname.startsWith("/operations")}
                variant="light"
              />
            )}
          </Stack>
        </AppShell.Section>
        <AppShell.Section p="xs">
          <Group gap={6} mb={4}>
            <IconFlask size={14} color="var(--mantine-color-gray-6)" />
            <Text size="xs" c="dimmed">
              OpenFOAM studies
            </Text>
          </Group>
          <QuotaLine />
        </AppShell.Section>
      </AppShell.Navbar>
      <AppShell.Main>
        <div style={{ maxWidth: 1480, margin: "0 auto" }}>
          <Outlet context={user} />
        </div>
      </AppShell.Main>
    </AppShell>
  );
}
