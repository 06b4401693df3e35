import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import type { AdminBackend, AdminImage, Pool } from "../api/admin";
import { usePools } from "../hooks/use-admin";
import { NewPoolButton } from "./pool-forms";
import { PoolsPanel } from "./pools-panel";

const backend = (name: string, kind: string) => ({ name, kind }) as AdminBackend;
const image = (digest: string, kind: string, status: string) =>
  ({ digest, kind, status }) as AdminImage;

const pool: Pool = {
  name: "cfd-small",
  backend: "cloud",
  flavor: "wt.small",
  image: "sha256:abc",
  nodes: 1,
  cores: 1,
  memory_gb: 1,
  min_workers: 0,
  max_workers: 2,
  idle_timeout: 60,
  boot_timeout: 300,
  enabled: true,
  draining: false,
  created_at: "2026-01-01T00:00:00Z",
  updated_at: "2026-01-01T00:00:00Z",
  workers: [
    {
      id: "6f1c0000-0000-4000-8000-000000000001",
      state: "busy",
      server_name: "wt-pool-cfd-small-6f1c0000",
      created_at: "2026-01-01T00:00:00Z",
      runs: ["aaaaaaaa-0000-4000-8000-000000000000"],
      cache: [],
      uptime_s: 60,
      utilisation: 1,
    },
  ],
  decisions: [],
};

function LivePools() {
  const pools = usePools();
  return pools.data ? <PoolsPanel pools={pools.data} /> : null;
}

describe("NewPoolButton", () => {
  it("offers only OpenStack backends and ready VM images, sends numbers, and shows the API's 400 under its field", async () => {
    const { calls } = mockApi({
      "POST /api/v1/admin/pools/": {
        status: 400,
        body: { code: "invalid", message: "no flavor 'wt.huge' in the cloud", field: "flavor" },
      },
    });
    renderWithApp(
      <NewPoolButton
        backends={[backend("laptop", "local"), backend("cloud", "openstack")]}
        images={[
          image("sha256:vm-ready", "vm", "ready"),
          image("sha256:vm-building", "vm", "building"),
          image("sha256:container", "container", "ready"),
        ]}
      />,
    );
    await userEvent.click(screen.getByRole("button", { name: "New pool" }));
    const form = within(screen.getByRole("form", { name: "New warm pool" }));
    expect(form.getByRole("textbox", { name: "Backend" })).toHaveValue("cloud");
    await userEvent.click(form.getByRole("textbox", { name: "Backend" }));
    expect(await screen.findByRole("option", { name: "cloud", hidden: true })).toBeInTheDocument();
    expect(screen.queryByRole("option", { name: "laptop", hidden: true })).toBeNull();
    await userEvent.keyboard("{Escape}");

    await userEvent.type(form.getByRole("textbox", { name: "Name" }), "cfd-small");
    await userEvent.type(form.getByRole("textbox", { name: "Flavor" }), "wt.huge");
    await userEvent.click(form.getByRole("textbox", { name: "Image" }));
    const ready = await screen.findByRole("option", { name: "sha256:vm-ready", hidden: true });
    expect(screen.queryByRole("option", { name: "sha256:vm-building", hidden: true })).toBeNull();
    expect(screen.queryByRole("option", { name: "sha256:container", hidden: true })).toBeNull();
    fireEvent.click(ready);
    const max = form.getByRole("textbox", { name: "Max workers" });
    await userEvent.clear(max);
    await userEvent.type(max, "3");
    await userEvent.click(form.getByRole("button", { name: "Create pool" }));

    const flavor = form.getByRole("textbox", { name: "Flavor" });
    expect(await form.findByText(/no flavor 'wt.huge' in the cloud/)).toBeVisible();
    expect(flavor).toHaveAttribute("aria-invalid", "true");
    expect(form.getByRole("textbox", { name: "Name" })).toHaveAttribute("aria-invalid", "false");
    expect(form.queryByTestId("form-error")).toBeNull();
    expect(calls.find((c) => c.method === "POST")!.body).toEqual({
      name: "cfd-small",
      backend: "cloud",
      flavor: "wt.huge",
      image: "sha256:vm-ready",
      nodes: 1,
      min_workers: 0,
      max_workers: 3,
      idle_timeout: 300,
      boot_timeout: 600,
    });
  });

  it("takes the first OpenStack backend when the backends arrive after the form opened", async () => {
    mockApi({});
    const { rerender } = renderWithApp(<NewPoolButton backends={[]} images={[]} />);
    await userEvent.click(screen.getByRole("button", { name: "New pool" }));
    const form = within(screen.getByRole("form", { name: "New warm pool" }));
    expect(form.getByRole("textbox", { name: "Backend" })).toHaveValue("");
    rerender(<NewPoolButton backends={[backend("cloud", "openstack")]} images={[]} />);
    expect(form.getByRole("textbox", { name: "Backend" })).toHaveValue("cloud");
  });
});

describe("DeletePoolButton", () => {
  it("says a pool with a busy worker drains, and shows it draining until it is gone", async () => {
    let state: "live" | "draining" | "gone" = "live";
    const { calls } = mockApi({
      "GET /api/v1/admin/pools/": () =>
        state === "gone" ? [] : [{ ...pool, draining: state === "draining" }],
      "DELETE /api/v1/admin/pools/cfd-small/": () => {
        state = "draining";
        return new Response(JSON.stringify({ ...pool, draining: true }), {
          status: 202,
          headers: { "Content-Type": "application/json" },
        });
      },
    });
    const { client } = renderWithApp(<LivePools />);
    await userEvent.click(await screen.findByRole("button", { name: "Delete cfd-small" }));
    // the confirmation opens with a transition: visible once it has run (under load, later)
    const warning = await screen.findByText(/1 live worker: it drains first/);
    await waitFor(() => expect(warning).toBeVisible());
    await userEvent.click(screen.getByRole("button", { name: "Delete pool" }));

    expect(await screen.findByText("draining")).toBeVisible();
    expect(screen.getByRole("button", { name: "Delete cfd-small" })).toBeDisabled();
    expect(screen.getByRole("button", { name: "Delete cfd-small" })).toHaveTextContent("Draining");
    expect(calls.filter((c) => c.method === "DELETE")).toHaveLength(1);

    state = "gone"; // its last worker's run ended: the autoscaler deleted the pool
    await client.invalidateQueries({ queryKey: ["admin", "pools"] });
    expect(await screen.findByText("No warm pools")).toBeVisible();
  });
});
