import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import type { AdminTenant, Member, QuotaAdmin } from "../api/admin";
import { MembersModal, QuotaModal, TenantActions } from "./tenant-forms";

const amounts = { cores: 0, memory_gb: 0, nodes: 0, runs: 0 };
const tenant: AdminTenant = {
  name: "aero",
  display_name: "Aero",
  active: true,
  admin_url: "/admin/tenancy/tenant/7/change/",
  quota_admin_url: "/admin/quotas/quota/7/change/",
  members: 1,
  studies: 0,
  limits: null,
  usage: amounts,
  queued: amounts,
  created_at: "2026-01-01T00:00:00Z",
};
const NOTE =
  "A quota applies to admission from now on: runs already admitted or running keep what they hold.";
const quota: QuotaAdmin = {
  tenant: "aero",
  quota: {
    cores: 8,
    memory_gb: 16,
    max_nodes: 4,
    max_runs: 4,
    max_queued_runs: 1000,
    storage_gb: 50,
    core_hours_budget: 500,
  },
  usage: amounts,
  over: [],
  note: NOTE,
  admin_url: "/admin/quotas/quota/7/change/",
};
const owner: Member = {
  user_id: 3,
  username: "olga",
  email: "olga@example.org",
  role: "admin",
  joined_at: "2026-01-01T00:00:00Z",
  admin_url: "/admin/tenancy/membership/3/change/",
  user_admin_url: "/admin/auth/user/3/change/",
};

describe("QuotaModal", () => {
  it("says when a quota applies, sends numbers, and shows the API's error under its field", async () => {
    const { calls } = mockApi({
      "GET /api/v1/admin/tenants/aero/quota/": () => quota,
      "PATCH /api/v1/admin/tenants/aero/quota/": {
        status: 400,
        body: {
          code: "invalid",
          message: "cores must be from 1 to 100000, got 1000000",
          field: "cores",
        },
      },
    });
    renderWithApp(<QuotaModal tenant={tenant} onClose={() => {}} />);
    expect(await screen.findByTestId("quota-applies")).toHaveTextContent("admission from now on");
    const cores = await screen.findByLabelText(/^Cores/);
    expect(cores).toHaveValue("8");
    expect(screen.getByRole("link", { name: /Quota in the Django admin/ })).toHaveAttribute(
      "href",
      "/admin/quotas/quota/7/change/",
    );

    await userEvent.clear(cores);
    await userEvent.type(cores, "1000000");
    await userEvent.clear(screen.getByLabelText(/^Core-hour budget/));
    await userEvent.click(screen.getByRole("button", { name: "Save quota" }));

    expect(await screen.findByText("cores must be from 1 to 100000, got 1000000")).toBeVisible();
    const sent = calls.find((c) => c.method === "PATCH")!.body as Record<string, unknown>;
    expect(sent.cores).toBe(1000000);
    expect(sent.core_hours_budget).toBeNull(); // an empty budget is "no budget"
    expect(sent.memory_gb).toBe(16);
    // the field's error is not repeated as a form error
    expect(screen.queryByTestId("form-error")).not.toBeInTheDocument();
  });
});

describe("MembersModal", () => {
  it("shows why the last admin cannot be removed, after asking", async () => {
    const { calls } = mockApi({
      "GET /api/v1/admin/tenants/aero/members/": () => [owner],
      "DELETE /api/v1/admin/tenants/aero/members/3/": {
        status: 400,
        body: {
          code: "invalid",
          message:
            "olga is the last admin of tenant aero: removing them would leave it without one. Make another member an admin first.",
          field: "role",
        },
      },
    });
    renderWithApp(<MembersModal tenant={tenant} onClose={() => {}} />);
    const row = within(await screen.findByTestId("member-olga"));
    await userEvent.click(row.getByRole("button", { name: "Remove" }));
    // nothing is sent before the confirmation
    expect(calls.filter((c) => c.method === "DELETE")).toHaveLength(0);
    await userEvent.click(await screen.findByRole("button", { name: "Remove member" }));
    expect(await screen.findByTestId("confirm-error")).toHaveTextContent(
      "Make another member an admin first",
    );
  });

  it("adds a user by e-mail and names the field when the user does not exist", async () => {
    const { calls } = mockApi({
      "GET /api/v1/admin/tenants/aero/members/": () => [owner],
      "POST /api/v1/admin/tenants/aero/members/": {
        status: 400,
        body: {
          code: "invalid",
          message: "no user with the username or e-mail address 'nobody@example.org'",
          field: "user",
        },
      },
    });
    renderWithApp(<MembersModal tenant={tenant} onClose={() => {}} />);
    await userEvent.type(await screen.findByLabelText(/Add a user/), "nobody@example.org");
    await userEvent.click(screen.getByRole("button", { name: "Add" }));
    expect(
      await screen.findByText("no user with the username or e-mail address 'nobody@example.org'"),
    ).toBeVisible();
    expect(calls.find((c) => c.method === "POST")!.body).toEqual({
      user: "nobody@example.org",
      role: "member",
    });
  });
});

describe("TenantActions", () => {
  it("deactivates only after the operator confirms, and links to the Django admin", async () => {
    const { calls } = mockApi({
      "PATCH /api/v1/admin/tenants/aero/": () => ({ ...tenant, active: false }),
      "GET /api/v1/admin/tenants/": () => [],
    });
    renderWithApp(<TenantActions tenant={tenant} />);
    expect(screen.getByRole("link", { name: /Django admin/ })).toHaveAttribute(
      "href",
      "/admin/tenancy/tenant/7/change/",
    );
    await userEvent.click(screen.getByRole("button", { name: "Edit aero" }));
    // the menu and the dialog open with a transition: a loaded machine may take a while
    const shown = { timeout: 10_000 };
    await userEvent.click(await screen.findByRole("menuitem", { name: "Deactivate…" }, shown));
    expect(
      await screen.findByText(/Its members are refused by the API/, undefined, shown),
    ).toBeInTheDocument();
    expect(calls.filter((c) => c.method === "PATCH")).toHaveLength(0);
    await userEvent.click(screen.getByRole("button", { name: "Deactivate" }));
    await waitFor(() =>
      expect(calls.find((c) => c.method === "PATCH")?.body).toEqual({ active: false }),
    );
  });
});
