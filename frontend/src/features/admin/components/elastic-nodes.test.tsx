import { screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import type { ElasticReport } from "../api/admin";
import { ElasticNodes } from "./elastic-nodes";

const report: ElasticReport = {
  backend: "hpc",
  partition: "cloud",
  settings: {},
  ok: true,
  nodes: [
    {
      node: "cloud-1",
      slurm_state: "allocated",
      reason: "",
      failed_boot: false,
      server: "wt-hpc-cloud-1",
      server_status: "ACTIVE",
      image: "wt-vm-openfoam",
      address: "10.0.0.7",
      uptime_seconds: 600,
      jobs: ["4711"],
      runs: ["aaaaaaaa-0000-4000-8000-000000000000"],
      utilisation: 0.5,
    },
    {
      node: "cloud-2",
      slurm_state: "down~",
      reason: "failed boot: no slurmd within ResumeTimeout (900 s)",
      failed_boot: true,
      server: "",
      server_status: "",
      image: "",
      address: "",
      uptime_seconds: null,
      jobs: [],
      runs: [],
      utilisation: 0,
    },
  ],
};

describe("ElasticNodes", () => {
  it("shows each node's run, image and utilisation beside Slurm's state, and a failed boot", async () => {
    mockApi({ "GET /api/v1/admin/backends/hpc/elastic/": { status: 200, body: report } });
    renderWithApp(<ElasticNodes name="hpc" onClose={() => {}} />);
    const table = within(await screen.findByTestId("elastic-nodes"));
    const busy = within(table.getByText("cloud-1").closest("tr")!);
    expect(busy.getByText("aaaaaaaa")).toBeInTheDocument();
    expect(busy.getByText("wt-vm-openfoam")).toBeInTheDocument();
    expect(busy.getByText("50 %")).toBeInTheDocument();
    expect(busy.getByText("10 min")).toBeInTheDocument();
    const failed = within(table.getByText("cloud-2").closest("tr")!);
    expect(failed.getByText("failed boot")).toBeInTheDocument();
    expect(failed.getByText(/no slurmd within ResumeTimeout/)).toBeInTheDocument();
    expect(failed.getByText("0 %")).toBeInTheDocument();
  });
});
