import { Card, Group, SimpleGrid, Skeleton, Stack, Tabs, Text, Title } from "@mantine/core";
import { useNavigate, useParams } from "react-router";
import { PageHeader } from "@/components/page-header";
import { ErrorState } from "@/components/states";
import {
  BackendsTable,
  ComposeImageButton,
  ImagesTable,
  NewBackendButton,
  NewPoolButton,
  NewTenantButton,
  PackagesTable,
  PoolsPanel,
  RunsPanel,
  TenantsTable,
  useAdminOverview,
  useAdminTenants,
  usePools,
} from "@/features/admin";
import { useMe } from "@/features/auth";
import { ApiError } from "@/lib/api-client";

const TABS = ["tenants", "runs", "backends", "pools", "catalog"] as const;
/** Other names of the tabs in links (/operations/images opens the images' tab). */
const ALIASES: Record<string, (typeof TABS)[number]> = {
  images: "catalog",
  packages: "catalog",
  tenant: "tenants",
  backend: "backends",
};

export function AdminPage() {
  const { tab } = useParams();
  const navigate = useNavigate();
  const me = useMe();
  const current = TABS.includes(tab as (typeof TABS)[number])
    ? (tab as string)
    : (ALIASES[tab ?? ""] ?? "tenants");
  const staff = !!me.data?.is_staff;
  const overview = useAdminOverview();
  const tenants = useAdminTenants();
  const pools = usePools();

  if (!staff || (overview.error instanceof ApiError && overview.error.status === 403)) {
    return (
      <>
        <PageHeader title="Admin" />
        <ErrorState
          title="Operators only"
          error={
            new Error(
              "This page is for Windtunnel operators (staff accounts). Ask an operator if you need to see every tenant.",
            )
          }
        />
      </>
    );
  }
  const o = overview.data;
  return (
    <>
      <PageHeader
        title="Admin"
        subtitle="Every tenant's quota, usage and running or queued runs, compute backends, packages and images: edit or stop them here, or open any of them in the Django admin."
      />
      <Stack gap="lg">
        <SimpleGrid cols={{ base: 2, md: 5 }}>
          {[
            ["Tenants", o?.tenants],
            ["Users", o?.users],
            ["Studies", o?.studies],
            [
              "Runs running",
              o
                ? o.runs_by_state.running + o.runs_by_state.provisioning + o.runs_by_state.admitted
                : undefined,
            ],
            ["Runs queued", o?.runs_by_state.pending],
          ].map(([label, value]) => (
            <Card key={label as string} padding="md">
              <Text size="xs" c="dimmed">
                {label}
              </Text>
              {value === undefined ? (
                <Skeleton h={28} w={60} mt={4} />
              ) : (
                <Title order={2} ff="monospace">
                  {value}
                </Title>
              )}
            </Card>
          ))}
        </SimpleGrid>
        <Tabs
          value={current}
          onChange={(v) => v && navigate(`/operations/${v}`)}
          keepMounted={false}
        >
          <Tabs.List>
            <Tabs.Tab value="tenants">Tenants</Tabs.Tab>
            <Tabs.Tab value="runs">Runs</Tabs.Tab>
            <Tabs.Tab value="backends">Backends</Tabs.Tab>
            <Tabs.Tab value="pools">Warm pools</Tabs.Tab>
            <Tabs.Tab value="catalog">Packages and images</Tabs.Tab>
          </Tabs.List>
          <Card padding="md" mt="md">
            <Tabs.Panel value="tenants">
              <Group justify="flex-end" mb="sm">
                <NewTenantButton />
              </Group>
              {tenants.isError ? (
                <ErrorState error={tenants.error} onRetry={() => tenants.refetch()} />
              ) : tenants.data ? (
                <TenantsTable tenants={tenants.data} />
              ) : (
                <Skeleton h={200} />
              )}
            </Tabs.Panel>
            <Tabs.Panel value="runs">
              <RunsPanel
                tenants={(tenants.data ?? []).map((t) => t.name)}
                backends={(o?.backends ?? []).map((b) => b.name)}
              />
            </Tabs.Panel>
            <Tabs.Panel value="backends">
              <Group justify="flex-end" mb="sm">
                <NewBackendButton />
              </Group>
              {overview.isError ? (
                <ErrorState error={overview.error} onRetry={() => overview.refetch()} />
              ) : o ? (
                <BackendsTable backends={o.backends} />
              ) : (
                <Skeleton h={200} />
              )}
            </Tabs.Panel>
            <Tabs.Panel value="pools">
              <Group justify="flex-end" mb="sm">
                <NewPoolButton backends={o?.backends ?? []} images={o?.images ?? []} />
              </Group>
              {pools.isError ? (
                <ErrorState error={pools.error} onRetry={() => pools.refetch()} />
              ) : pools.data ? (
                <PoolsPanel pools={pools.data} />
              ) : (
                <Skeleton h={200} />
              )}
            </Tabs.Panel>
            <Tabs.Panel value="catalog">
              {overview.isError ? (
                <ErrorState error={overview.error} onRetry={() => overview.refetch()} />
              ) : o ? (
                <Stack gap="xl">
                  <div>
                    <Group justify="space-between" mb="xs">
                      <Title order={4}>Packages</Title>
                      <Text size="xs" c="dimmed">
                        synced from packages/
                      </Text>
                    </Group>
                    <PackagesTable overview={o} />
                  </div>
                  <div>
                    <Group justify="space-between" mb="xs">
                      <Title order={4}>Images</Title>
                      <ComposeImageButton packages={o.packages.map((p) => p.name)} />
                    </Group>
                    <ImagesTable overview={o} />
                  </div>
                </Stack>
              ) : (
                <Skeleton h={200} />
              )}
            </Tabs.Panel>
          </Card>
        </Tabs>
      </Stack>
    </>
  );
}
