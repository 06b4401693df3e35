import { Badge, Box, Card, Group, SimpleGrid, Stack, Text, Title, Tooltip } from "@mantine/core";
import { IconAlertTriangle } from "@/components/icons";
import { formatDateTime, formatGb, formatRelative, plural } from "@/lib/format";
import type { EffectiveBackend, LimitSource } from "@/lib/types";

const SOURCE: Record<LimitSource, { color: string; variant: string; tip: string }> = {
  "portal quota": { color: "gray", variant: "light", tip: "your tenant's quota in the portal" },
  "backend capacity": {
    color: "gray",
    variant: "light",
    tip: "the most this backend offers (its configured capacity)",
  },
  "cloud project limit": {
    color: "orange",
    variant: "filled",
    tip: "the OpenStack project's compute limit, below your quota: ask the cloud's operators to raise it",
  },
};

const LIMITS = [
  { key: "cores", label: "Cores", format: (v: number) => plural(v, "core") },
  { key: "memory_gb", label: "Memory", format: formatGb },
  { key: "nodes", label: "Nodes", format: (v: number) => plural(v, "node") },
] as const;

/** Per backend the tenant may use: the effective limits and where each comes from. */
export function BackendLimits({ backends }: { backends: EffectiveBackend[] }) {
  if (!backends.length) return null;
  return (
    <Card withBorder padding="md" radius="md" data-testid="quota-backends">
      <Stack gap="sm">
        <div>
          <Title order={4}>Effective limits per backend</Title>
          <Text size="xs" c="dimmed">
            A run may use the smallest of your quota, the backend&apos;s capacity and, on OpenStack,
            the cloud project&apos;s limits.
          </Text>
        </div>
        <SimpleGrid cols={4} spacing="xs" visibleFrom="sm" aria-hidden>
          {["Backend", ...LIMITS.map((l) => l.label)].map((h) => (
            <Text key={h} size="xs" fw={600} c="dimmed" tt="uppercase">
              {h}
            </Text>
          ))}
        </SimpleGrid>
        {backends.map((b) => (
          <BackendRow key={b.backend} backend={b} />
        ))}
      </Stack>
    </Card>
  );
}

function BackendRow({ backend: b }: { backend: EffectiveBackend }) {
  return (
    <Box
      data-testid={`quota-backend-${b.backend}`}
      pt="xs"
      style={{ borderTop: "1px solid var(--mantine-color-default-border)" }}
    >
      <SimpleGrid cols={{ base: 1, sm: 4 }} spacing="xs" verticalSpacing={4}>
        <Text size="sm" fw={600} style={{ overflowWrap: "anywhere" }}>
          {b.backend}{" "}
          <Text span size="xs" c="dimmed" fw={400}>
            ({b.kind})
          </Text>
        </Text>
        {LIMITS.map(({ key, label, format }) => {
          const limit = b.limits[key];
          const source = SOURCE[limit.source] ?? SOURCE["portal quota"];
          return (
            <Group
              key={key}
              gap={6}
              wrap="wrap"
              data-testid={`quota-backend-${b.backend}-${key}`}
              data-source={limit.source}
            >
              <Text size="xs" c="dimmed" hiddenFrom="sm" w={56}>
                {label}
              </Text>
              <Text size="sm" ff="monospace">
                {format(limit.value)}
              </Text>
              <Tooltip label={source.tip} withArrow multiline maw={280}>
                <Badge size="xs" radius="sm" color={source.color} variant={source.variant}>
                  {limit.source}
                </Badge>
              </Tooltip>
            </Group>
          );
        })}
      </SimpleGrid>
      {b.cloud_error ? (
        <Group gap={6} wrap="nowrap" align="flex-start" mt={6} data-testid="quota-cloud-error">
          <IconAlertTriangle
            size={14}
            color="var(--mantine-color-red-6)"
            style={{ flex: "none" }}
          />
          <Text
            size="xs"
            c="var(--mantine-color-red-light-color)"
            style={{ overflowWrap: "anywhere" }}
          >
            {b.cloud_read_at ? (
              <>
                Cloud limits last read{" "}
                <span title={formatDateTime(b.cloud_read_at)}>
                  {formatRelative(b.cloud_read_at)}
                </span>
              </>
            ) : (
              "Cloud limits could not be read"
            )}
            : {b.cloud_error}
          </Text>
        </Group>
      ) : b.cloud_read_at ? (
        <Text size="xs" c="dimmed" mt={4}>
          Cloud limits read{" "}
          <span title={formatDateTime(b.cloud_read_at)}>{formatRelative(b.cloud_read_at)}</span>
        </Text>
      ) : null}
    </Box>
  );
}
