import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { MeshIndependencePanel } from "./mesh-independence";

afterEach(() => {
  vi.restoreAllMocks();
});

const PATH = "GET /api/v1/studies/s1/mesh-independence/";

const ANSWER = {
  parameter: "cells",
  kind: "per_direction",
  dims: 3,
  levels: [
    { value: 40, h: 0.025 },
    { value: 20, h: 0.05 },
    { value: 10, h: 0.1 },
  ],
  objectives: {
    u_min: {
      phi: [-0.198125, -0.1925, -0.17],
      h: [0.025, 0.05, 0.1],
      r21: 2,
      r32: 2,
      p: 2,
      phi_ext: -0.2,
      e_a: 0.0292,
      e_ext: 0.0094,
      gci_fine: 0.0122,
      gci_coarse: 0.0487,
      asymptotic_ratio: 1.03,
      in_asymptotic_range: true,
      oscillatory: false,
    },
  },
  refused: {
    flat: "flat is the same on two neighbouring levels (1, 1, 1): no order of accuracy can be observed; refine further or check the objective",
  },
};

describe("MeshIndependencePanel", () => {
  it("shows each objective's order, extrapolated value and GCI over the refinement parameter", async () => {
    const { calls } = mockApi({ [PATH]: () => ANSWER });
    renderWithApp(<MeshIndependencePanel studyId="s1" parameters={["lid_velocity", "cells"]} />);
    const row = await screen.findByTestId("gci-u_min");
    // the parameter that names the mesh is picked, and asked for as cells per direction
    expect(calls[0]?.url.searchParams.get("parameter")).toBe("cells");
    expect(calls[0]?.url.searchParams.get("kind")).toBe("per_direction");
    expect(row).toHaveTextContent("u_min-0.1981-0.221.2 %yes (ratio 1.03)");
    expect(screen.getByTestId("mesh-independence-table")).toHaveTextContent(
      "flat is the same on two neighbouring levels",
    );
    expect(screen.getByText(/Levels 40, 20, 10 of cells/)).toBeInTheDocument();
    // the same answer downloads as CSV, for the parameter and kind shown
    const csv = new URL(
      screen.getByTestId("mesh-independence-csv").getAttribute("href") ?? "",
      "http://x",
    );
    expect(csv.pathname).toBe("/api/v1/studies/s1/mesh-independence.csv");
    expect(csv.searchParams.get("parameter")).toBe("cells");
    expect(csv.searchParams.get("kind")).toBe("per_direction");
  });

  it("says why the procedure cannot run, in the API's words", async () => {
    const message =
      "'cells' has 2 completed level(s); the procedure needs three or more (add finer or coarser levels)";
    mockApi({ [PATH]: { status: 400, body: { code: "invalid", field: "parameter", message } } });
    renderWithApp(<MeshIndependencePanel studyId="s1" parameters={["cells"]} />);
    expect(await screen.findByTestId("mesh-independence-refused")).toHaveTextContent(message);
  });

  it("asks again for another kind of refinement value", async () => {
    const { calls } = mockApi({ [PATH]: () => ANSWER });
    renderWithApp(<MeshIndependencePanel studyId="s1" parameters={["n"]} />);
    await screen.findByTestId("gci-u_min");
    await userEvent.click(screen.getByRole("textbox", { name: "its value is" }));
    await userEvent.click(await screen.findByRole("option", { name: "total cells", hidden: true }));
    await waitFor(() => expect(calls.at(-1)?.url.searchParams.get("kind")).toBe("total"));
    expect(calls.at(-1)?.url.searchParams.get("parameter")).toBe("n");
    expect(calls.at(-1)?.url.searchParams.get("dims")).toBe("3");
  });

  it("asks for a 2-D mesh's total cells with its dimensions, in the answer and the CSV", async () => {
    const { calls } = mockApi({ [PATH]: () => ANSWER });
    renderWithApp(<MeshIndependencePanel studyId="s1" parameters={["n"]} />);
    await screen.findByTestId("gci-u_min");
    // cells per direction need no dimensions: none is asked, and no control is shown
    expect(calls[0]?.url.searchParams.get("dims")).toBeNull();
    expect(screen.queryByRole("textbox", { name: "in a mesh of" })).not.toBeInTheDocument();
    await userEvent.click(screen.getByRole("textbox", { name: "its value is" }));
    await userEvent.click(await screen.findByRole("option", { name: "total cells", hidden: true }));
    await userEvent.click(await screen.findByRole("textbox", { name: "in a mesh of" }));
    await userEvent.click(
      await screen.findByRole("option", { name: "2 dimensions", hidden: true }),
    );
    await waitFor(() => expect(calls.at(-1)?.url.searchParams.get("dims")).toBe("2"));
    expect(calls.at(-1)?.url.searchParams.get("kind")).toBe("total");
    const csv = new URL(
      screen.getByTestId("mesh-independence-csv").getAttribute("href") ?? "",
      "http://x",
    );
    expect(csv.searchParams.get("dims")).toBe("2");
  });
});
