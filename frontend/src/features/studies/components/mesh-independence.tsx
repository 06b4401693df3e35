import { Alert, Badge, Button, Group, Select, Stack, Table, Text } from "@mantine/core";
import { IconDownload } from "@/components/icons";
import { useQuery } from "@tanstack/react-query";
import type { Data } from "plotly.js";
import { useMemo, useState } from "react";
import { Plot } from "@/components/plot";
import { PlotSelect } from "@/components/plot-select";
import { ApiError, apiUrl } from "@/lib/api-client";
import type { GridConvergence, MeshIndependence } from "@/lib/types";
import { fetchMeshIndependence, type MeshDims, type MeshKind } from "../api/studies";
import { studyKeys } from "../hooks/use-studies";

const KINDS: { value: MeshKind; label: string }[] = [
  { value: "per_direction", label: "cells per direction" },
  { value: "total", label: "total cells" },
  { value: "size", label: "cell size" },
];

/** A figure of the procedure as people read it: 3 significant digits. */
function num(x: number): string {
  return Number.isFinite(x) ? String(Number(x.toPrecision(4))) : "—";
}

function percent(x: number): string {
  return Number.isFinite(x) ? `${Number((100 * x).toPrecision(2))} %` : "—";
}

/**
 * Is the mesh fine enough? Per objective, over a refinement parameter's three finest levels:
 * the observed order of accuracy, the value extrapolated to a zero cell size and the grid
 * convergence index (Celik et al. 2008), with the asymptotic-range check; a plot of the
 * objective against the cell size with the extrapolated value at h = 0.
 */
export function MeshIndependencePanel({
  studyId,
  parameters,
}: {
  studyId: string;
  parameters: string[];
}) {
  const [parameter, setParameter] = useState<string>(
    parameters.find((p) => /cell|mesh|refine|level/i.test(p)) ?? parameters[0] ?? "",
  );
  const [kind, setKind] = useState<MeshKind>("per_direction");
  // a total cell count's dimensions (a 2-D case's cells fill a plane); the others need none
  const [chosenDims, setDims] = useState<MeshDims>(3);
  const dims = kind === "total" ? chosenDims : undefined;
  const [shown, setShown] = useState<string | null>(null);
  const query = { parameter, kind, ...(dims ? { dims: String(dims) } : {}) };
  const answer = useQuery({
    queryKey: [...studyKeys.detail(studyId), "mesh-independence", parameter, kind, dims] as const,
    queryFn: ({ signal }) => fetchMeshIndependence(studyId, { parameter, kind, dims }, { signal }),
    enabled: parameter !== "",
    retry: false,
  });
  const data = answer.data;
  const names = Object.keys(data?.objectives ?? {});
  const objective = shown && names.includes(shown) ? shown : (names[0] ?? "");
  const chosen = data?.objectives[objective];
  return (
    <Stack gap="sm" data-testid="mesh-independence">
      <Group gap="sm" align="flex-end">
        <Select
          size="xs"
          label="Refinement parameter"
          data={parameters}
          value={parameter}
          onChange={(v) => v && setParameter(v)}
          allowDeselect={false}
          w={180}
        />
        <Select
          size="xs"
          label="its value is"
          data={KINDS}
          value={kind}
          onChange={(v) => v && setKind(v as MeshKind)}
          allowDeselect={false}
          w={170}
        />
        {kind === "total" && (
          <Select
            size="xs"
            label="in a mesh of"
            data={[
              { value: "3", label: "3 dimensions" },
              { value: "2", label: "2 dimensions" },
              { value: "1", label: "1 dimension" },
            ]}
            value={String(chosenDims)}
            onChange={(v) => v && setDims(Number(v) as MeshDims)}
            allowDeselect={false}
            w={140}
            data-testid="mesh-dims"
          />
        )}
        {data && (
          <Button
            size="xs"
            variant="default"
            leftSection={<IconDownload size={14} />}
            component="a"
            href={apiUrl(
              `/api/v1/studies/${studyId}/mesh-independence.csv?${new URLSearchParams(query).toString()}`,
            )}
            download
            data-testid="mesh-independence-csv"
          >
            Download CSV
          </Button>
        )}
      </Group>
      {answer.isError ? (
        <Alert color="gray" variant="light" data-testid="mesh-independence-refused">
          {answer.error instanceof ApiError ? answer.error.message : "Could not compute it."}
        </Alert>
      ) : data ? (
        <MeshTable data={data} />
      ) : (
        <Text size="sm" c="dimmed">
          …
        </Text>
      )}
      {chosen && (
        <>
          <PlotSelect
            label="Plot"
            data={names}
            value={objective}
            onPick={(v) => setShown(v)}
            w={160}
          />
          <ConvergencePlot gci={chosen} objective={objective} />
        </>
      )}
    </Stack>
  );
}

function MeshTable({ data }: { data: MeshIndependence }) {
  const rows = Object.entries(data.objectives);
  const refused = Object.entries(data.refused);
  return (
    <>
      <Text size="xs" c="dimmed">
        Levels {data.levels.map((l) => num(l.value)).join(", ")} of {data.parameter} (fine to
        coarse), as Celik et al. (2008) set out: GCI is the fine level&apos;s uncertainty band.
      </Text>
      <Table striped withTableBorder data-testid="mesh-independence-table">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Objective</Table.Th>
            <Table.Th>Fine value</Table.Th>
            <Table.Th>Extrapolated</Table.Th>
            <Table.Th>Order p</Table.Th>
            <Table.Th>GCI fine</Table.Th>
            <Table.Th>Asymptotic range</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.map(([name, g]) => (
            <Table.Tr key={name} data-testid={`gci-${name}`}>
              <Table.Td>{name}</Table.Td>
              <Table.Td>{num(g.phi[0] ?? NaN)}</Table.Td>
              <Table.Td>{num(g.phi_ext)}</Table.Td>
              <Table.Td>
                {num(g.p)}
                {g.oscillatory && (
                  <Badge size="xs" ml={6} color="orange" variant="light">
                    oscillating
                  </Badge>
                )}
              </Table.Td>
              <Table.Td>{percent(g.gci_fine)}</Table.Td>
              <Table.Td>
                {g.in_asymptotic_range ? "yes" : "no"} (ratio {num(g.asymptotic_ratio)})
              </Table.Td>
            </Table.Tr>
          ))}
          {refused.map(([name, why]) => (
            <Table.Tr key={name}>
              <Table.Td>{name}</Table.Td>
              <Table.Td colSpan={5}>
                <Text size="xs" c="dimmed">
                  {why}
                </Text>
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </>
  );
}

function ConvergencePlot({ gci, objective }: { gci: GridConvergence; objective: string }) {
  const data = useMemo<Data[]>(
    () => [
      {
        type: "scatter",
        mode: "lines+markers",
        name: "levels",
        x: gci.h,
        y: gci.phi,
      },
      {
        type: "scatter",
        mode: "lines+markers",
        name: "extrapolated (h → 0)",
        x: [0, gci.h[0] ?? 0],
        y: [gci.phi_ext, gci.phi[0] ?? gci.phi_ext],
        line: { dash: "dot" },
        marker: { symbol: "star", size: 10 },
      },
    ],
    [gci],
  );
  const layout = useMemo(
    () => ({
      xaxis: { title: { text: "cell size h" }, rangemode: "tozero" as const },
      yaxis: { title: { text: objective } },
      showlegend: true,
    }),
    [objective],
  );
  return (
    <Plot
      data={data}
      layout={layout}
      height={300}
      aria-label={`${objective} versus cell size`}
      data-testid="mesh-independence-plot"
    />
  );
}
