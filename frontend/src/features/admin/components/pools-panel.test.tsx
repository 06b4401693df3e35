import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import type { Pool } from "../api/admin";
import { PoolsPanel } from "./pools-panel";

const pool: Pool = {
  name: "cfd-medium",
  backend: "cloud",
  flavor: "wt.medium",
  image: "sha256:abc",
  nodes: 1,
  cores: 2,
  memory_gb: 2,
  min_workers: 0,
  max_workers: 3,
  idle_timeout: 300,
  boot_timeout: 300,
  enabled: true,
  draining: false,
  boot_failures: 1,
  next_boot_at: "2026-01-01T00:00:10Z",
  created_at: "2026-01-01T00:00:00Z",
  updated_at: "2026-01-01T00:00:00Z",
  workers: [
    {
      id: "6f1c0000-0000-4000-8000-000000000001",
      state: "busy",
      server_name: "wt-pool-cfd-medium-6f1c0000",
      image_ref: "glance-image-id",
      cores: 2,
      created_at: "2026-01-01T00:00:00Z",
      runs: ["aaaaaaaa-0000-4000-8000-000000000000"],
      runs_done: 4,
      cache: [],
      uptime_s: 600,
      utilisation: 0.75,
    },
    {
      id: "6f1c0000-0000-4000-8000-000000000002",
      state: "failed",
      server_name: "wt-pool-cfd-medium-6f1c0002",
      end_reason: "worker wt-pool-cfd-medium-6f1c0002 did not register within 300 s",
      created_at: "2026-01-01T00:00:00Z",
      runs: [],
      cache: [],
      uptime_s: 300,
      utilisation: 0,
    },
  ],
  decisions: [
    {
      at: "2026-01-01T00:00:05Z",
      action: "boot_failed",
      count: -1,
      reason: "worker did not register within 300 s; failed boot 1 in a row: next boot in 10 s",
    },
    {
      at: "2026-01-01T00:00:00Z",
      action: "up",
      count: 2,
      reason: "3 run(s) wait (3 cores), 0 cores free or booting: boot 2, max 3",
    },
  ],
};

describe("PoolsPanel", () => {
  it("shows workers, failed boots and decisions, and edits max with the API's error under its field", async () => {
    const { calls } = mockApi({
      "PATCH /api/v1/admin/pools/cfd-medium/": {
        status: 400,
        body: {
          code: "invalid",
          message: "max_workers 60 needs 60 instances; the OpenStack project allows 50",
          field: "max_workers",
        },
      },
    });
    renderWithApp(<PoolsPanel pools={[pool]} />);
    const workers = within(screen.getByRole("table", { name: "Workers" }));
    expect(workers.getByText("busy")).toBeVisible();
    expect(workers.getByText("75 %")).toBeVisible();
    expect(workers.getByText(/did not register within 300 s/)).toBeVisible();
    expect(screen.getByText("1 failed boot in a row")).toBeVisible();
    expect(screen.getByText(/3 run\(s\) wait/)).toBeVisible();

    const max = screen.getByLabelText("Max");
    await userEvent.clear(max);
    await userEvent.type(max, "60");
    await userEvent.click(screen.getByRole("button", { name: "Save" }));
    expect(await screen.findByText(/the OpenStack project allows 50/)).toBeVisible();
    const sent = calls.find((c) => c.method === "PATCH")!.body as Record<string, unknown>;
    expect(sent).toEqual({ min_workers: 0, max_workers: 60, idle_timeout: 300 });
  });
});
