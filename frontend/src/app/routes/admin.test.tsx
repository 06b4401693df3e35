import { screen } from "@testing-library/react";
import { Route, Routes } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { AdminPage } from "./admin";

afterEach(() => vi.restoreAllMocks());

describe("AdminPage", () => {
  it("opens the images' tab at /operations/images (not the tenants')", async () => {
    mockApi({
      "GET /api/v1/me/": () => ({ username: "op", is_staff: true, tenants: [] }),
      "GET /api/v1/admin/overview/": () => new Promise(() => {}),
      "GET /api/v1/admin/tenants/": () => [],
    });
    renderWithApp(
      <Routes>
        <Route path="/operations/:tab" element={<AdminPage />} />
      </Routes>,
      { route: "/operations/images" },
    );
    const tab = await screen.findByRole("tab", { name: "Packages and images" });
    expect(tab).toHaveAttribute("aria-selected", "true");
    expect(screen.getByRole("tab", { name: "Tenants" })).toHaveAttribute("aria-selected", "false");
  });
});
