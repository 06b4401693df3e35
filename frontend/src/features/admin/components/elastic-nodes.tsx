import { Alert, Badge, Modal, Skeleton, Table, Text } from "@mantine/core";
import { errorMessage } from "@/lib/api-client";
import { useElastic } from "../hooks/use-admin";

function uptime(seconds: number | null | undefined): string {
  if (seconds == null) return "–";
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

/** Slurm's power-saving suffixes: ~ powered down, # powering up, % powering down, * not responding. */
function stateColor(state: string): string {
  if (state.startsWith("down") || state.startsWith("drain")) return "red";
  if (state.includes("#") || state.includes("%")) return "yellow";
  if (state.endsWith("~")) return "gray";
  return "teal";
}

/** A Slurm backend's elastic partition: each node's Slurm state and reason beside its server. */
export function ElasticNodes({ name, onClose }: { name: string; onClose: () => void }) {
  const report = useElastic(name);
  return (
    <Modal opened onClose={onClose} title={`Elastic partition of ${name}`} size="xl">
      {report.isPending && <Skeleton h={120} />}
      {report.error && <Alert color="red">{errorMessage(report.error)}</Alert>}
      {report.data && !report.data.ok && <Alert color="red">{report.data.error}</Alert>}
      {report.data && (
        <>
          <Text size="sm" mb="xs">
            Partition <b>{report.data.partition}</b>: Slurm powers nodes up and down; settings are
            edited under Settings (settings.elastic).
          </Text>
          <Table data-testid="elastic-nodes" striped>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Node</Table.Th>
                <Table.Th>Slurm</Table.Th>
                <Table.Th>Reason</Table.Th>
                <Table.Th>Runs</Table.Th>
                <Table.Th>Server</Table.Th>
                <Table.Th>Address</Table.Th>
                <Table.Th>Uptime</Table.Th>
                <Table.Th>Utilisation</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {report.data.nodes.map((n) => (
                <Table.Tr key={n.node}>
                  <Table.Td>{n.node}</Table.Td>
                  <Table.Td>
                    <Badge color={stateColor(n.slurm_state)} variant="light">
                      {n.slurm_state}
                    </Badge>
                    {n.failed_boot && (
                      <Badge color="red" ml={4}>
                        failed boot
                      </Badge>
                    )}
                  </Table.Td>
                  <Table.Td>{n.reason || "–"}</Table.Td>
                  <Table.Td>
                    <Text size="xs" ff="monospace">
                      {n.runs.map((r) => r.slice(0, 8)).join(", ") ||
                        (n.jobs.length ? `job ${n.jobs.join(", ")}` : "–")}
                    </Text>
                  </Table.Td>
                  <Table.Td>
                    {n.server ? `${n.server} (${n.server_status})` : "none"}
                    {n.image && (
                      <Text size="xs" c="dimmed">
                        {n.image}
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td>{n.address || "–"}</Table.Td>
                  <Table.Td>{uptime(n.uptime_seconds)}</Table.Td>
                  <Table.Td>
                    {n.utilisation == null ? "–" : `${Math.round(n.utilisation * 100)} %`}
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </>
      )}
    </Modal>
  );
}
