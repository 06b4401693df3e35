import { Anchor, Table } from "@mantine/core";
import { Link } from "react-router";
import { formatNumber } from "@/lib/format";
import type { Run } from "@/lib/types";
import { runName } from "../lib/run-names";

/** Parameters and objectives of a few runs side by side (one column per run). */
export function CompareTable({ runs }: { runs: Run[] }) {
  const parameters = [...new Set(runs.flatMap((r) => Object.keys(r.parameters)))];
  const objectives = [...new Set(runs.flatMap((r) => Object.keys(r.objectives ?? {})))];
  const differs = (values: unknown[]) => new Set(values.map((v) => JSON.stringify(v))).size > 1;
  const row = (kind: string, name: string, values: unknown[], digits = 4) => (
    <Table.Tr key={`${kind}-${name}`} data-differs={differs(values) || undefined}>
      <Table.Th scope="row" fw={differs(values) ? 700 : 500}>
        {name}
      </Table.Th>
      {values.map((v, i) => (
        <Table.Td key={runs[i]!.id} ff="monospace">
          {formatNumber(v, digits)}
        </Table.Td>
      ))}
    </Table.Tr>
  );
  return (
    <Table.ScrollContainer minWidth={400}>
      <Table striped withTableBorder data-testid="compare-table">
        <Table.Thead>
          <Table.Tr>
            <Table.Th />
            {runs.map((r) => (
              <Table.Th key={r.id}>
                <Anchor component={Link} to={`/runs/${r.id}`} size="sm">
                  {runName(r, runs)}
                </Anchor>
              </Table.Th>
            ))}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          <Table.Tr>
            <Table.Th scope="row">state</Table.Th>
            {runs.map((r) => (
              <Table.Td key={r.id}>{r.state}</Table.Td>
            ))}
          </Table.Tr>
          {parameters.map((p) =>
            row(
              "param",
              p,
              runs.map((r) => r.parameters[p]),
            ),
          )}
          {objectives.map((o) =>
            row(
              "obj",
              o,
              runs.map((r) => r.objectives?.[o] ?? null),
              5,
            ),
          )}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
