import { screen, waitFor } from "@testing-library/react";
import Plotly from "plotly.js-dist-min";
import { describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { FieldCompare } from "./field-compare";
import { FlowFields } from "./field-view";

const grid = (name: string) => ({ name, x0: 0, y0: 0, dx: 0.5, dy: 0.5, nx: 3, ny: 2 });

const index = (run: string, fields = ["p", "mag(U)"]) => ({
  run,
  available: true,
  preparing: false,
  time: "500",
  kind: "2d",
  plane: { normal: "z", at: 0.025, axes: ["x", "y"] },
  fields: fields.map((name) => ({
    name,
    label: name === "mag(U)" ? "|U|" : name,
    dimensions: "",
    min: 0,
    max: 1,
  })),
  regions: [grid("domain"), grid("body")],
  cp: {
    patches: ["walls"],
    reference: {
      text: "Cp = (p - 0) / (0.5 * 26^2) from forceCoeffs's magUInf",
      magUInf: 26,
      rhoInf: null,
      pRef: 0,
      lRef: 35.05,
      chord: 35,
    },
    x_over_c: [0, 0.5, 1],
    cp: [1, -0.4, 0.1],
    side: ["lower", "upper", "lower"],
    patch: ["walls", "walls", "walls"],
  },
  notes: ["k: no readable volume field at time 500"],
});

const data = (run: string, values: (number | null)[]) => (url: URL) => ({
  run,
  field: url.searchParams.get("field"),
  label: "|U|",
  dimensions: "0 1 -1 0 0 0 0",
  region: grid(url.searchParams.get("region") ?? "domain"),
  values,
  min: 0,
  max: 1,
  outline: { x: [0, 1, null], y: [0, 0, null] },
});

describe("FlowFields", () => {
  it("shows |U| near the body first, Cp with the reference it used, and the notes", async () => {
    const { calls } = mockApi({
      "GET /api/v1/runs/r1/fields/": () => index("r1"),
      "GET /api/v1/runs/r1/fields/data/": data("r1", [1, 2, null, 4, 5, 6]),
    });
    renderWithApp(<FlowFields runId="r1" ended />);
    await waitFor(
      () => expect(screen.getByTestId("field-plot")).toHaveAttribute("data-points", "6"),
      { timeout: 5_000 }, // Plotly loads on the first plot: slow on a busy machine
    ); // the heat map's 3 columns + the outline's 3 points
    const asked = calls.find((c) => c.url.pathname.endsWith("/data/"))!.url.searchParams;
    expect([asked.get("field"), asked.get("region")]).toEqual(["mag(U)", "body"]);
    expect(screen.getByTestId("cp-reference")).toHaveTextContent("magUInf");
    expect(screen.getByTestId("cp-plot")).toHaveAttribute("data-points", "3");
    expect(screen.getByTestId("fields-notes")).toHaveTextContent("k: no readable");
    expect(screen.getByText(/time 500 \(2-D case\)/)).toBeInTheDocument();
  });

  it("draws the region's extent with the mesh's aspect ratio, one unit of x as long as of y", async () => {
    vi.mocked(Plotly.react).mockClear();
    mockApi({
      "GET /api/v1/runs/r4/fields/": () => index("r4"),
      "GET /api/v1/runs/r4/fields/data/": (url: URL) => ({
        ...data("r4", Array(8).fill(1))(url),
        // a long, low channel (pitzDaily-like): 0.31 wide, 0.05 high
        region: { name: "domain", x0: -0.02, y0: -0.025, dx: 0.31 / 3, dy: 0.05, nx: 4, ny: 2 },
      }),
    });
    renderWithApp(<FlowFields runId="r4" ended />);
    await waitFor(
      () => expect(screen.getByTestId("field-plot")).toHaveAttribute("data-points", "7"),
      { timeout: 5_000 },
    );
    const calls = vi.mocked(Plotly.react).mock.calls;
    type Axis = { range?: number[]; constrain?: string; scaleanchor?: string };
    type Drawn = { xaxis?: Axis; yaxis?: Axis; uirevision?: string };
    const drawn = calls.map((c) => c[2] as Drawn).find((l) => l.xaxis?.range);
    expect(drawn!.xaxis!.range![0]).toBeCloseTo(-0.02);
    expect(drawn!.xaxis!.range![1]).toBeCloseTo(0.29);
    expect(drawn!.yaxis!.range).toEqual([-0.025, 0.025]);
    expect(drawn!.yaxis).toMatchObject({ scaleanchor: "x", scaleratio: 1, constrain: "domain" });
    expect(drawn!.xaxis!.constrain).toBe("domain");
    expect(drawn!.uirevision).toBe("r4:domain"); // another run or region starts unzoomed
  });

  it("says why a run has no fields, and asks nothing before the run completed", async () => {
    const { calls } = mockApi({
      "GET /api/v1/runs/r2/fields/": () => ({
        run: "r2",
        available: false,
        preparing: false,
        fields: [],
        regions: [],
        notes: [],
      }),
    });
    const { unmount } = renderWithApp(<FlowFields runId="r2" ended={false} />);
    expect(screen.getByText(/appear here when the run has completed/)).toBeInTheDocument();
    expect(calls).toHaveLength(0);
    unmount();
    renderWithApp(<FlowFields runId="r2" ended />);
    expect(await screen.findByTestId("fields-none", {}, { timeout: 5_000 })).toHaveTextContent(
      "no flow fields",
    );
  });

  it("says the fields are being prepared, asks again, and shows them once made", async () => {
    let asked = 0;
    mockApi({
      "GET /api/v1/runs/r3/fields/": () => {
        asked += 1;
        return asked < 2
          ? { run: "r3", available: false, preparing: true, fields: [], regions: [], notes: [] }
          : index("r3");
      },
      "GET /api/v1/runs/r3/fields/data/": data("r3", [1, 2, null, 4, 5, 6]),
    });
    renderWithApp(<FlowFields runId="r3" ended />);
    expect(await screen.findByTestId("fields-preparing")).toHaveTextContent("Preparing");
    expect(await screen.findByTestId("flow-fields", {}, { timeout: 5_000 })).toBeInTheDocument();
    expect(asked).toBe(2);
  });
});

describe("FieldCompare", () => {
  it("draws the runs' field on one colour scale and leaves out runs without fields", async () => {
    mockApi({
      "GET /api/v1/runs/a/fields/": () => index("a"),
      "GET /api/v1/runs/b/fields/": () => index("b", ["p", "mag(U)", "k"]),
      "GET /api/v1/runs/c/fields/": () => ({
        run: "c",
        available: false,
        preparing: false,
        fields: [],
        regions: [],
        notes: [],
      }),
      "GET /api/v1/runs/a/fields/data/": data("a", [0.5, 1, null, 2, 3, 1]),
      "GET /api/v1/runs/b/fields/data/": data("b", [-1, 0, 7, null, 1, 1]),
    });
    renderWithApp(
      <FieldCompare
        runs={[
          { id: "a", label: "Run 1" },
          { id: "b", label: "Run 2" },
          { id: "c", label: "Run 3" },
        ]}
      />,
    );
    await waitFor(
      () => expect(screen.getByTestId("field-compare-range")).toHaveTextContent("from -1 to 7"),
      { timeout: 5_000 },
    );
    expect(screen.getByTestId("field-compare-range")).toHaveTextContent(
      "1 run without fields left out",
    );
    expect(screen.getAllByTestId("field-compare-plot")).toHaveLength(2);
  });
});
