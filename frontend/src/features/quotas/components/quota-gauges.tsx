import { Card, SimpleGrid, Skeleton, Stack, Text, Tooltip } from "@mantine/core";
import { Meter } from "@/components/meter";
import { ErrorState } from "@/components/states";
import { CORE_HOURS_HINT, formatCoreHours, formatGb, formatInt, plural } from "@/lib/format";
import type { QuotaSnapshot } from "@/lib/types";
import { useQuota } from "../hooks/use-quota";
import { BackendLimits } from "./backend-limits";

/**
 * Cores, memory and runs: in use, queued demand, limit; under them, per backend, the
 * effective limits and where each comes from.
 */
export function QuotaGauges() {
  const quota = useQuota();
  if (quota.isError)
    return (
      <ErrorState error={quota.error} title="Quota unavailable" onRetry={() => quota.refetch()} />
    );
  const q = quota.data;
  return (
    <Stack gap="md">
      <SimpleGrid cols={{ base: 1, sm: 3 }} spacing="md">
        {(["cores", "memory", "runs"] as const).map((key) => (
          <Card key={key} withBorder padding="md" radius="md">
            {!q ? (
              <Stack gap={8}>
                <Skeleton h={14} w="50%" />
                <Skeleton h={16} />
                <Skeleton h={12} w="70%" />
              </Stack>
            ) : key === "cores" ? (
              <Meter
                label="Cores"
                used={q.usage.cores}
                queued={q.queued.cores}
                limit={q.limits.cores}
                testId="quota-cores"
              />
            ) : key === "memory" ? (
              <Meter
                label="Memory"
                used={q.usage.memory_gb}
                queued={q.queued.memory_gb}
                limit={q.limits.memory_gb}
                format={formatGb}
                testId="quota-memory"
              />
            ) : (
              <Meter
                label="Concurrent runs"
                used={q.usage.runs}
                queued={q.queued.runs}
                limit={q.limits.runs}
                testId="quota-runs"
              />
            )}
          </Card>
        ))}
      </SimpleGrid>
      {q && <BudgetGauges quota={q} />}
      {q && <BackendLimits backends={q.backends ?? []} />}
    </Stack>
  );
}

const formatHours = (v: number) =>
  `${v < 10 ? Number(v.toFixed(1)) : formatInt(Math.round(v))} core-h`;

function monthOf(iso: string): string {
  return new Date(iso).toLocaleDateString(undefined, {
    month: "long",
    year: "numeric",
    timeZone: "UTC",
  });
}

/**
 * The core-hour budget (used this calendar month / budget) and storage (used / limit), each
 * shown when the operator set it; storage also when it is full (a quota of 0), saying what
 * that stops and what to do.
 */
function BudgetGauges({ quota }: { quota: QuotaSnapshot }) {
  const hours = quota.core_hours;
  const storage = quota.storage;
  const showHours = hours && hours.budget !== null && hours.budget !== undefined;
  const showStorage = storage && (storage.limit_gb > 0 || storage.full);
  if (!hours && !showStorage) return null;
  return (
    <SimpleGrid cols={{ base: 1, sm: 3 }} spacing="md">
      {showHours ? (
        <Card withBorder padding="md" radius="md">
          <Meter
            label="Core-hour budget"
            used={hours.used}
            limit={hours.budget as number}
            format={formatHours}
            caption={`used in ${monthOf(hours.period_start)} (UTC); it starts again each month`}
            testId="quota-core-hours"
          />
        </Card>
      ) : hours ? (
        <Card withBorder padding="md" radius="md">
          <Tooltip label={CORE_HOURS_HINT} multiline w={320} withArrow>
            <Text size="sm" fw={500} style={{ cursor: "help", width: "fit-content" }}>
              Core-hours this month
            </Text>
          </Tooltip>
          <Text size="xl" fw={700} ff="monospace" data-testid="quota-core-hours-used">
            {formatCoreHours(hours.used)}
          </Text>
          <Text size="xs" c="dimmed">
            used in {monthOf(hours.period_start)} (UTC); no budget is set
          </Text>
        </Card>
      ) : null}
      {showStorage && (
        <Card withBorder padding="md" radius="md">
          <Meter
            label="Storage"
            used={storage.used_gb}
            limit={storage.limit_gb}
            format={formatGb}
            caption="case uploads, result archives and run directories"
            testId="quota-storage"
          />
          {storage.full && (
            <Text size="xs" c="red" mt={6} data-testid="quota-storage-full">
              Full: {storage.problem}. Until then new studies are refused and queued runs wait.
            </Text>
          )}
        </Card>
      )}
    </SimpleGrid>
  );
}

export function QuotaLine() {
  const quota = useQuota({ live: false });
  if (!quota.data) return null;
  const q = quota.data;
  return (
    <Text size="xs" c="dimmed">
      Quota of {q.tenant}: {plural(q.limits.cores, "core")}, {formatGb(q.limits.memory_gb)},{" "}
      {plural(q.limits.runs, "concurrent run")}
    </Text>
  );
}
