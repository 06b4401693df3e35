import { render, screen } from "@testing-library/react";
import { MantineProvider } from "@mantine/core";
import { describe, expect, it } from "vitest";
import type { RunDetail } from "@/lib/types";
import { WaitReason } from "./wait-reason";

function run(fields: Partial<RunDetail>): RunDetail {
  return {
    state: "pending",
    phase: "",
    backend: "hpc",
    message: "",
    wait_reason: "",
    wait_detail: "",
    queue_position: null,
    ...fields,
  } as RunDetail;
}

function show(r: RunDetail) {
  render(
    <MantineProvider>
      <WaitReason run={r} />
    </MantineProvider>,
  );
}

describe("WaitReason", () => {
  it("says why a queued run waits and where it stands", () => {
    show(
      run({
        wait_reason: "backend_capacity",
        wait_detail:
          "backend capacity: 2 cores in use + 2 for this run, over the 2 cores backend hpc has",
        queue_position: 3,
      }),
    );
    expect(screen.getByTestId("wait-reason")).toHaveTextContent(
      "Queued: number 3 in your tenant's queue on hpc",
    );
    // in words, once: the reason is not repeated in the scheduler's detail
    expect(screen.getByTestId("wait-reason")).toHaveTextContent(
      "The compute backend is full; the run starts when capacity frees up. Now: 2 cores in use + 2 for this run, over the 2 cores backend hpc has.",
    );
    expect(screen.getByTestId("wait-reason")).not.toHaveTextContent("backend capacity:");
  });

  it("says a run waits for room in the tenant's storage, with the figures and what to do", () => {
    show(
      run({
        wait_reason: "storage",
        wait_detail:
          "storage quota of 0.05 GB used up (0.21 GB stored): delete studies or uploads you no longer need, or ask an admin for more",
      }),
    );
    expect(screen.getByTestId("wait-reason")).toHaveTextContent(
      "Your tenant's storage quota is used up; the run starts once there is room again. Now: storage quota of 0.05 GB used up (0.21 GB stored): delete studies or uploads you no longer need, or ask an admin for more.",
    );
  });

  it("says a run waits for the next month's core-hour budget, and until when", () => {
    show(
      run({
        wait_reason: "core_hour_budget",
        wait_detail:
          "monthly core-hour budget of 10 core-hours used up: runs start again on 1 January 2027 (00:00 UTC), or when an admin raises the budget",
      }),
    );
    expect(screen.getByTestId("wait-reason")).toHaveTextContent(
      "Your tenant's monthly core-hour budget is used up. Now: monthly core-hour budget of 10 core-hours used up: runs start again on 1 January 2027 (00:00 UTC), or when an admin raises the budget.",
    );
  });

  it("says why a submitted job waits in the cluster's own queue, not the earlier attempt", () => {
    show(
      run({
        state: "provisioning",
        phase: "queued",
        message:
          "queued on hpc: Resources (waiting for free CPUs, memory or nodes)\nattempt 1 ended: Slurm: NODE_FAIL",
      }),
    );
    expect(screen.getByTestId("wait-reason")).toHaveTextContent("Queued on hpc");
    const reason = screen.getByTestId("backend-queue-reason");
    expect(reason).toHaveTextContent("Resources (waiting for free CPUs, memory or nodes)");
    expect(reason).not.toHaveTextContent("NODE_FAIL");
  });

  it("says an admitted run waits for a pool worker to boot, and how many boot", () => {
    show(
      run({
        state: "admitted",
        wait_reason: "pool_worker",
        wait_detail: "waiting for a worker to boot (pool cfd-medium, 1 of 3 booting)",
      }),
    );
    expect(screen.getByTestId("wait-reason")).toHaveTextContent("Admitted: waiting for a worker");
    expect(screen.getByTestId("pool-wait-reason")).toHaveTextContent(
      "waiting for a worker to boot (pool cfd-medium, 1 of 3 booting)",
    );
  });

  it("says nothing for a run that is running", () => {
    show(run({ state: "running" }));
    expect(screen.queryByTestId("wait-reason")).toBeNull();
  });
});
