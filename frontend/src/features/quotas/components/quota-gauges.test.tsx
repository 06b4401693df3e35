import { screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { QuotaSnapshot } from "@/lib/types";
import { mockApi, renderWithApp } from "@/test/render";
import { QuotaGauges } from "./quota-gauges";

const amounts = { cores: 0, memory_gb: 0, nodes: 0, runs: 0 };

function snapshot(backends: QuotaSnapshot["backends"]): QuotaSnapshot {
  return {
    tenant: "aero",
    limits: {
      cores: 16,
      memory_gb: 16,
      nodes: 8,
      runs: 4,
      queued_runs: 100,
      storage_gb: 50,
      core_hours_budget: null,
    },
    usage: { ...amounts, cores: 2, memory_gb: 4, runs: 1 },
    queued: amounts,
    backends,
    core_hours: { used: 0, budget: null, period_start: "2026-03-01T00:00:00Z" },
    storage: { used_gb: 0, used_bytes: 0, limit_gb: 50, full: false, problem: "" },
  };
}

const local = {
  backend: "local",
  kind: "local",
  limits: {
    cores: { value: 8, source: "backend capacity" },
    memory_gb: { value: 16, source: "portal quota" },
    nodes: { value: 1, source: "backend capacity" },
  },
  cloud_read_at: null,
  cloud_error: "",
} as const;

const cloud = {
  backend: "cloud",
  kind: "openstack",
  limits: {
    cores: { value: 4, source: "cloud project limit" },
    memory_gb: { value: 16, source: "portal quota" },
    nodes: { value: 8, source: "backend capacity" },
  },
  cloud_read_at: new Date(Date.now() - 5 * 60_000).toISOString(),
  cloud_error: "Keystone answered 401: the application credential expired",
} as const;

describe("QuotaGauges", () => {
  it("shows each backend's effective limits and where each comes from", async () => {
    mockApi({ "GET /api/v1/quota/": () => snapshot([local, cloud]) });
    renderWithApp(<QuotaGauges />);

    // the three meters keep their test ids
    expect(await screen.findByTestId("quota-cores")).toHaveTextContent("2 / 16");
    expect(screen.getByTestId("quota-memory")).toBeInTheDocument();
    expect(screen.getByTestId("quota-runs")).toBeInTheDocument();

    const row = within(await screen.findByTestId("quota-backend-cloud"));
    expect(row.getByText("cloud")).toBeInTheDocument();
    expect(row.getByText("(openstack)")).toBeInTheDocument();

    const cores = screen.getByTestId("quota-backend-cloud-cores");
    expect(cores).toHaveTextContent("4 cores");
    expect(cores).toHaveAttribute("data-source", "cloud project limit");
    const memory = screen.getByTestId("quota-backend-cloud-memory_gb");
    expect(memory).toHaveTextContent("16 GB");
    expect(memory).toHaveTextContent("portal quota");
    const nodes = screen.getByTestId("quota-backend-cloud-nodes");
    expect(nodes).toHaveTextContent("8 nodes");
    expect(nodes).toHaveTextContent("backend capacity");

    // the cloud project's limit stands out (filled orange badge); the others stay quiet
    const cloudBadge = within(cores).getByText("cloud project limit");
    const quietBadge = within(memory).getByText("portal quota");
    const badgeRoot = (el: HTMLElement) => el.closest(".mantine-Badge-root")!;
    expect(badgeRoot(cloudBadge)).toHaveAttribute("data-variant", "filled");
    expect(badgeRoot(quietBadge)).toHaveAttribute("data-variant", "light");
    expect(badgeRoot(cloudBadge).getAttribute("style")).toContain("orange");

    // the last failure reading the cloud, with when the limits were last read
    expect(row.getByTestId("quota-cloud-error")).toHaveTextContent(
      /Cloud limits last read 5 minutes ago: Keystone answered 401: the application credential expired/,
    );

    // a backend without a cloud has no cloud badge and no error
    const localRow = within(screen.getByTestId("quota-backend-local"));
    expect(localRow.queryByText("cloud project limit")).not.toBeInTheDocument();
    expect(localRow.queryByTestId("quota-cloud-error")).not.toBeInTheDocument();
    const localCores = screen.getByTestId("quota-backend-local-cores");
    expect(localCores).toHaveTextContent("8 cores");
    expect(localCores).toHaveAttribute("data-source", "backend capacity");
  });

  it("says when the cloud's limits were never read", async () => {
    mockApi({
      "GET /api/v1/quota/": () =>
        snapshot([{ ...cloud, cloud_read_at: null, cloud_error: "timeout" }]),
    });
    renderWithApp(<QuotaGauges />);
    expect(await screen.findByTestId("quota-cloud-error")).toHaveTextContent(
      "Cloud limits could not be read: timeout",
    );
  });

  it("leaves the per-backend part out when there is no backend", async () => {
    mockApi({ "GET /api/v1/quota/": () => snapshot([]) });
    renderWithApp(<QuotaGauges />);
    expect(await screen.findByTestId("quota-cores")).toBeInTheDocument();
    expect(screen.queryByTestId("quota-backends")).not.toBeInTheDocument();
  });
});

describe("QuotaGauges: core-hour budget and storage", () => {
  it("shows the budget used this month and the storage used against their limits", async () => {
    mockApi({
      "GET /api/v1/quota/": () => ({
        ...snapshot([]),
        core_hours: { used: 412.4, budget: 1000, period_start: "2026-11-01T00:00:00Z" },
        storage: {
          used_gb: 12.5,
          used_bytes: 12.5 * 1024 ** 3,
          limit_gb: 50,
          full: false,
          problem: "",
        },
      }),
    });
    renderWithApp(<QuotaGauges />);
    const hours = await screen.findByTestId("quota-core-hours");
    expect(hours).toHaveTextContent("412 core-h");
    expect(hours).toHaveTextContent("/ 1,000 core-h");
    expect(hours).toHaveTextContent("November 2026");
    const storage = screen.getByTestId("quota-storage");
    expect(storage).toHaveTextContent("12.5 GB");
    expect(storage).toHaveTextContent("/ 50 GB");
    expect(within(storage).getAllByRole("progressbar")[0]).toHaveAttribute("aria-valuenow", "25");
    expect(screen.queryByTestId("quota-storage-full")).not.toBeInTheDocument();
  });

  it("says when storage is full, what that stops and what to do", async () => {
    const problem =
      "storage quota of 0.05 GB used up (0.21 GB stored): delete studies or uploads you no " +
      "longer need, or ask an admin for more";
    mockApi({
      "GET /api/v1/quota/": () => ({
        ...snapshot([]),
        storage: { used_gb: 0.213, used_bytes: 228589568, limit_gb: 0.05, full: true, problem },
      }),
    });
    renderWithApp(<QuotaGauges />);
    const storage = await screen.findByTestId("quota-storage");
    expect(storage).toHaveTextContent("0.213 GB");
    expect(storage).toHaveTextContent("/ 0.05 GB");
    // the bar is full and red
    const bar = within(storage).getAllByRole("progressbar")[0]!;
    expect(bar).toHaveAttribute("aria-valuenow", "100");
    expect(bar.getAttribute("style") ?? "").toContain("red");
    expect(screen.getByTestId("quota-storage-full")).toHaveTextContent(
      `Full: ${problem}. Until then new studies are refused and queued runs wait.`,
    );
  });

  it("shows a storage quota of 0 as full", async () => {
    mockApi({
      "GET /api/v1/quota/": () => ({
        ...snapshot([]),
        storage: {
          used_gb: 0,
          used_bytes: 0,
          limit_gb: 0,
          full: true,
          problem: "storage quota of 0 GB used up (0 GB stored): delete studies or uploads",
        },
      }),
    });
    renderWithApp(<QuotaGauges />);
    expect(await screen.findByTestId("quota-storage-full")).toHaveTextContent(
      "storage quota of 0 GB used up",
    );
  });

  it("shows the core-hours used this month, without a meter, when no budget is set", async () => {
    mockApi({
      "GET /api/v1/quota/": () => ({
        ...snapshot([]),
        core_hours: { used: 3, budget: null, period_start: "2026-11-01T00:00:00Z" },
        storage: { used_gb: 0, used_bytes: 0, limit_gb: 50, full: false, problem: "" },
      }),
    });
    renderWithApp(<QuotaGauges />);
    expect(await screen.findByTestId("quota-storage")).toBeInTheDocument();
    expect(screen.queryByTestId("quota-core-hours")).not.toBeInTheDocument();
    expect(screen.getByTestId("quota-core-hours-used")).toHaveTextContent("3 core-h");
  });
});
