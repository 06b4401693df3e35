import { MantineProvider } from "@mantine/core";
import { render, screen, within } from "@testing-library/react";
import { MemoryRouter } from "react-router";
import { describe, expect, it } from "vitest";
import { ReusedBadge } from "@/components/reused-badge";
import type { Provenance } from "@/lib/types";
import { ProvenancePanel } from "./provenance-panel";
import { shellLine } from "./shell-line";

const PROVENANCE = {
  identity: { hash: "ab12".repeat(16), inputs: { solver: "icoFoam" }, context: {} },
  solver: "icoFoam",
  openfoam_version: "OPENFOAM=1912 patch=200626",
  openfoam: { build: "OPENFOAM=1912 patch=200626" },
  image: null,
  packages: { openfoam: "1912" },
  backend: { name: "local", kind: "local" },
  hosts: ["node-7"],
  agent_host: "node-7",
  job_id: "4242",
  processes: 2,
  nodes: 1,
  decompose: { method: "hierarchical", subdomains: 2 },
  commands: [
    {
      name: "blockMesh",
      role: "prepare",
      command: "blockMesh",
      argv: ["blockMesh"],
      exit_code: 0,
    },
    {
      name: "icoFoam",
      role: "solve",
      command: "mpirun -np 2 icoFoam -parallel",
      argv: ["mpirun", "-np", "2", "icoFoam", "-parallel"],
      exit_code: 1,
    },
  ],
  planned_commands: [],
  rerun: ["blockMesh > log.blockMesh 2>&1"],
  environment: { allowlist: { names: ["PATH"], prefixes: ["WM_"] } },
  sandbox: "bwrap",
  limits: {
    cgroup: true,
    detail: "",
    memory_gb: 2,
    cpus: 2,
    processes: 1024,
    disk_gb: 50,
    memory_peak_bytes: 130_000_000,
  },
  started_at: "2026-11-25T02:00:00Z",
  finished_at: "2026-11-25T02:01:00Z",
  exit_code: 1,
  end_reason: "exit_code",
  attempt: 1,
  resumed_from: null,
  agent_version: "1.1.0",
  portal_version: "0.1.0",
  case: { template: "cavity", upload: null, digest: "sha256:00" },
  run: "11111111-1111-4111-8111-111111111111",
  study: "22222222-2222-4222-8222-222222222222",
  study_name: "sweep",
  index: 3,
} as Provenance;

function show(node: React.ReactNode) {
  render(
    <MantineProvider>
      <MemoryRouter>{node}</MemoryRouter>
    </MantineProvider>,
  );
}

describe("ProvenancePanel", () => {
  it("shows what made the results: identity, OpenFOAM, hosts, versions and each command with its exit code", () => {
    show(<ProvenancePanel provenance={PROVENANCE} />);
    expect(screen.getByTestId("provenance-identity")).toHaveTextContent("ab12ab12");
    expect(screen.getByTestId("provenance-openfoam")).toHaveTextContent("OPENFOAM=1912");
    expect(screen.getByTestId("provenance-hosts")).toHaveTextContent("node-7");
    expect(screen.getByTestId("provenance-versions")).toHaveTextContent("1.1.0 · 0.1.0");
    expect(screen.getByTestId("provenance-image")).toHaveTextContent("none");
    const rows = within(screen.getByTestId("provenance-commands")).getAllByRole("row");
    expect(rows).toHaveLength(2);
    expect(rows[1]).toHaveTextContent("mpirun -np 2 icoFoam -parallel");
    expect(rows[1]).toHaveTextContent("exit 1");
    expect(screen.getByRole("button", { name: "Copy commands" })).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Copy the identity" })).toBeInTheDocument();
  });

  it("says what held the run to its limits, and when the kernel did not", () => {
    show(<ProvenancePanel provenance={PROVENANCE} />);
    const limits = screen.getByTestId("provenance-limits");
    expect(limits).toHaveTextContent("memory 2 GB, 2 cores, 1,024 processes, disk 50 GB");
    expect(limits).toHaveTextContent("enforced by the kernel; peak memory 130 MB");
    show(
      <ProvenancePanel
        provenance={{
          ...PROVENANCE,
          limits: { ...PROVENANCE.limits!, cgroup: false, detail: "no memory controller" },
        }}
      />,
    );
    expect(screen.getAllByTestId("provenance-limits")[1]).toHaveTextContent(
      "not enforced by the kernel (no memory controller)",
    );
  });

  it("shows the planned commands until the agent has reported", () => {
    show(
      <ProvenancePanel
        provenance={{
          ...PROVENANCE,
          commands: [],
          planned_commands: [{ name: "icoFoam", argv: ["icoFoam"], role: "solve" }],
          hosts: [],
        }}
      />,
    );
    expect(screen.getByText("Commands (planned: no agent report yet)")).toBeInTheDocument();
    expect(screen.getByTestId("provenance-hosts")).toHaveTextContent("—");
  });

  it("says which write an attempt went on from and what it changed, as the agent recorded it", () => {
    show(<ProvenancePanel provenance={PROVENANCE} />);
    expect(screen.queryByTestId("provenance-resumed-from")).toBeNull();
    show(
      <ProvenancePanel
        provenance={{
          ...PROVENANCE,
          attempt: 2,
          resumed_from: {
            attempt: 1,
            time: "0.3",
            iterations: null,
            end_time: 0.5,
            settings: { controlDict: { deltaT: "0.0005" } },
            source: null,
            source_index: null,
            mapped: false,
            blend: null,
          } as Provenance["resumed_from"],
        }}
      />,
    );
    expect(screen.getByTestId("provenance-resumed-from")).toHaveTextContent(
      "time 0.3 of attempt 1 (to time 0.5; changed: controlDict deltaT = 0.0005)",
    );
  });

  it("quotes arguments a shell would split", () => {
    expect(shellLine({ argv: ["foamDictionary", "-entry", "a b", "it's"] })).toBe(
      "foamDictionary -entry 'a b' 'it'\\''s'",
    );
  });
});

describe("ReusedBadge", () => {
  it("links a reused run to the run that computed it", () => {
    show(<ReusedBadge run={{ reused: true, reused_from: "abc-123" }} />);
    expect(screen.getByTestId("reused-badge")).toHaveTextContent("Reused");
    expect(screen.getByTestId("reused-link")).toHaveAttribute("href", "/runs/abc-123");
  });

  it("shows nothing for a computed run, and no link once the source is gone", () => {
    show(<ReusedBadge run={{ reused: false, reused_from: null }} />);
    expect(screen.queryByTestId("reused-badge")).toBeNull();
    show(<ReusedBadge run={{ reused: true, reused_from: null }} />);
    expect(screen.getByTestId("reused-badge")).toBeInTheDocument();
    expect(screen.queryByTestId("reused-link")).toBeNull();
  });
});
