import { Alert, Badge, Code, Group, Stack, Table, Text } from "@mantine/core";
import { IconAlertTriangle } from "@/components/icons";
import type { CaseInspection } from "@/lib/types";

/**
 * What the portal read from a case before it runs: the solver its controlDict names, the
 * mesh steps, each placeholder with its type, and every series its runs will send (the ones
 * objectives and convergence rules may use).
 */
export function CaseInspectionPanel({ inspection }: { inspection: CaseInspection }) {
  const placeholders = Object.entries(inspection.placeholders).flatMap(([file, items]) =>
    items.map((p) => ({ file, ...p })),
  );
  const quiet = inspection.function_objects.filter((fo) => fo.series.length === 0 && fo.note);
  return (
    <Stack gap="sm" data-testid="case-inspection">
      <Group gap="xs">
        <Text size="sm" fw={600}>
          Solver
        </Text>
        {inspection.solver ? (
          <Code data-testid="inspected-solver">{inspection.solver}</Code>
        ) : (
          <Text size="sm" c="dimmed">
            not named by controlDict (pick one in Run configuration)
          </Text>
        )}
        <Text size="sm" fw={600} ml="md">
          Mesh
        </Text>
        <Text size="sm">
          {inspection.mesh_steps.length
            ? inspection.mesh_steps.join(" → ")
            : inspection.has_mesh
              ? "ships its mesh"
              : "no mesh step found"}
        </Text>
      </Group>
      {inspection.errors.length > 0 && (
        <Alert color="orange" variant="light" icon={<IconAlertTriangle size={16} />}>
          <Text size="sm">Part of the case could not be read, so its series are not checked:</Text>
          {inspection.errors.map((e) => (
            <Text key={e} size="sm" ff="monospace">
              {e}
            </Text>
          ))}
        </Alert>
      )}
      {placeholders.length > 0 && (
        <Table verticalSpacing={4} aria-label="Placeholders" withTableBorder>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Placeholder</Table.Th>
              <Table.Th>Type</Table.Th>
              <Table.Th>File</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {placeholders.map((p) => (
              <Table.Tr key={`${p.file}:${p.name}`}>
                <Table.Td ff="monospace">{p.name}</Table.Td>
                <Table.Td>{p.type}</Table.Td>
                <Table.Td ff="monospace">
                  {p.file}:{p.line}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <div>
        <Text size="sm" fw={600}>
          Series its runs will send ({inspection.series.length})
        </Text>
        <Group gap={4} mt={4} data-testid="inspected-series">
          {inspection.series.map((s) => (
            <Badge key={s} variant="light" color="gray" tt="none" ff="monospace">
              {s}
            </Badge>
          ))}
        </Group>
        {quiet.map((fo) => (
          <Text key={fo.name} size="xs" c="dimmed" mt={4}>
            <code>{fo.name}</code> ({fo.type}): {fo.note}
          </Text>
        ))}
      </div>
    </Stack>
  );
}
