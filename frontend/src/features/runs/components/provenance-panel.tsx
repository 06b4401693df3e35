import { Badge, Code, Group, SimpleGrid, Stack, Table, Text } from "@mantine/core";
import { Fact } from "@/components/fact";
import { CopyIcon, CopyTextButton } from "@/components/copy-button";
import { describeResume } from "@/lib/continuation";
import { formatBytes, formatDateTime, plural } from "@/lib/format";
import type { Provenance } from "@/lib/types";
import { shellLine, type Command } from "./shell-line";

type Image = { name?: string; digest?: string } | null;
type Identity = { hash?: string; inputs?: Record<string, unknown> };
type Environment = {
  allowlist?: { names?: string[]; prefixes?: string[] };
  set_by_run_configuration?: Record<string, string>;
};

/** The run's provenance (docs/provenance.md): what made its results, enough to rerun the
 * case by hand, with copy buttons for the identity, the commands and the whole record. */
export function ProvenancePanel({ provenance }: { provenance: Provenance }) {
  const identity = (provenance.identity ?? {}) as Identity;
  const image = provenance.image as Image;
  const environment = (provenance.environment ?? {}) as Environment;
  const ran = (provenance.commands ?? []) as Command[];
  const commands = ran.length ? ran : ((provenance.planned_commands ?? []) as Command[]);
  const packages = Object.entries(provenance.packages ?? {});
  const hosts = provenance.hosts?.length ? provenance.hosts.join(", ") : "—";
  const script = commands.map(shellLine).join("\n");
  const set = Object.entries(environment.set_by_run_configuration ?? {});
  return (
    <Stack gap="md" data-testid="provenance">
      <Group justify="space-between" align="flex-start">
        <Fact
          label="Identity (content hash of what determines the result)"
          testId="provenance-identity"
        >
          <Group gap={4} wrap="nowrap">
            <span>{identity.hash || "—"}</span>
            {identity.hash && <CopyIcon value={identity.hash} label="Copy the identity" />}
          </Group>
        </Fact>
        <CopyTextButton value={JSON.stringify(provenance, null, 2)} label="Copy as JSON" />
      </Group>
      <SimpleGrid cols={{ base: 1, sm: 2, lg: 4 }} spacing="md">
        <Fact label="Solver">{provenance.solver}</Fact>
        <Fact label="OpenFOAM" testId="provenance-openfoam">
          {provenance.openfoam_version || "—"}
        </Fact>
        <Fact label="Image" testId="provenance-image">
          {image
            ? `${image.name ?? ""} ${image.digest ?? ""}`
            : "none (the backend's own OpenFOAM)"}
        </Fact>
        <Fact label="Backend · job id">
          {`${(provenance.backend as { name?: string })?.name ?? ""} · ${provenance.job_id || "—"}`}
        </Fact>
        <Fact label="Host(s)" testId="provenance-hosts">
          {hosts}
        </Fact>
        <Fact label="Processes · decomposition">
          {provenance.processes}
          {provenance.decompose ? ` · ${JSON.stringify(provenance.decompose)}` : " · serial"}
        </Fact>
        <Fact label="Started · ended">
          {`${formatDateTime(provenance.started_at)} · ${formatDateTime(provenance.finished_at)}`}
        </Fact>
        <Fact label="Exit code">{provenance.exit_code ?? "—"}</Fact>
        <Fact label="Agent · portal version" testId="provenance-versions">
          {`${provenance.agent_version || "—"} · ${provenance.portal_version}`}
        </Fact>
        <Fact label="Sandbox">{provenance.sandbox || "—"}</Fact>
        <Fact label="Limits" testId="provenance-limits">
          {describeLimits(provenance.limits)}
        </Fact>
        <Fact label="Attempt">{provenance.attempt}</Fact>
      </SimpleGrid>
      {provenance.resumed_from && (
        <Fact label="Went on from (the agent's record)" testId="provenance-resumed-from">
          {describeResume(provenance.resumed_from)}
        </Fact>
      )}
      <Stack gap={4}>
        <Group justify="space-between">
          <Text size="sm" fw={600}>
            {ran.length ? "Commands as they ran" : "Commands (planned: no agent report yet)"}
          </Text>
          {script && <CopyTextButton value={script} label="Copy commands" />}
        </Group>
        <Table withTableBorder fz="xs" data-testid="provenance-commands">
          <Table.Tbody>
            {commands.map((c, i) => (
              <Table.Tr key={`${c.name}-${i}`}>
                <Table.Td w={140}>{c.name}</Table.Td>
                <Table.Td>
                  <Code>{shellLine(c)}</Code>
                </Table.Td>
                <Table.Td w={90}>
                  {c.exit_code === undefined ? (
                    ""
                  ) : (
                    <Badge size="xs" color={c.exit_code === 0 ? "teal" : "red"} variant="light">
                      exit {c.exit_code ?? "?"}
                    </Badge>
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Stack>
      {packages.length > 0 && (
        <Fact label="Packages">{packages.map(([n, v]) => `${n} ${v}`).join(", ")}</Fact>
      )}
      <Fact label="Environment allowlist in force">
        {[
          ...(environment.allowlist?.names ?? []),
          ...(environment.allowlist?.prefixes ?? []).map((p) => `${p}*`),
        ].join(" ") || "—"}
      </Fact>
      {set.length > 0 && (
        <Fact label="Set by the run configuration">
          {set.map(([k, v]) => `${k}=${v}`).join(" ")}
        </Fact>
      )}
      <Text size="xs" c="dimmed">
        The run's archive holds the same record as windtunnel-provenance.json.
      </Text>
    </Stack>
  );
}

/** What held the run to what it declared: the kernel (its cgroup) or nothing but the
 * numbers admission counted, and the highest memory it used. */
function describeLimits(limits: Provenance["limits"]): string {
  if (!limits) return "—";
  const parts = [
    limits.memory_gb ? `memory ${limits.memory_gb} GB` : "memory unlimited",
    limits.cpus ? plural(limits.cpus, "core") : "cores unlimited",
    limits.processes ? plural(limits.processes, "process", "processes") : "processes unlimited",
  ];
  if (limits.disk_gb) parts.push(`disk ${limits.disk_gb} GB`);
  const held = limits.cgroup
    ? "enforced by the kernel"
    : `not enforced by the kernel${limits.detail ? ` (${limits.detail})` : ""}`;
  const peak =
    limits.memory_peak_bytes != null
      ? `; peak memory ${formatBytes(limits.memory_peak_bytes)}`
      : "";
  return `${parts.join(", ")}: ${held}${peak}`;
}
