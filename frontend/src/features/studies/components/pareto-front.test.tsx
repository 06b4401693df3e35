import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import Plotly from "plotly.js-dist-min";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { isFrontStudy } from "../lib/pareto-traces";
import { ParetoFrontPanel } from "./pareto-front";

beforeEach(() => {
  vi.mocked(Plotly.react).mockClear();
});

afterEach(() => {
  vi.restoreAllMocks();
  // back to the stand-in's own drawing (a test may have it take listeners)
  vi.mocked(Plotly.react).mockReset();
});

const PATH = "GET /api/v1/studies/s1/pareto/";

const run = (
  id: string,
  index: number,
  batch: number,
  values: Record<string, number | null>,
  kind: "front" | "dominated" | "infeasible",
) => ({ id, index, batch, values, feasible: kind !== "infeasible", front: kind === "front" });

/** Lift to drag of a wing, drag kept low, lift at least 0.5: six runs in three batches. */
const ANSWER = {
  objectives: [
    { name: "LD", direction: "max" },
    { name: "Cd", direction: "min" },
  ],
  constraints: [{ objective: "Cl", min: 0.5, max: null }],
  completed: 6,
  missing: 1,
  feasible: 4,
  front_size: 3,
  hypervolume: 0.12,
  hypervolume_share: 0.83,
  reference: { LD: 7.2, Cd: 0.035 },
  history: [
    { batch: 1, runs: 2, hypervolume_share: 0.41 },
    { batch: 2, runs: 4, hypervolume_share: 0.6 },
    { batch: 3, runs: 6, hypervolume_share: 0.83 },
  ],
  progress: {
    goal: "pareto",
    objectives: ["LD", "Cd"],
    direction: null,
    directions: { LD: "max", Cd: "min" },
    constraints: [{ objective: "Cl", min: 0.5, max: null }],
    batch: 3,
    max_batches: 5,
    runs: 6,
    budget: 10,
    batch_size: 2,
    initial: 2,
    tolerance: null,
    end: "",
    end_display: "",
  },
  runs: [
    run("r1", 1, 1, { LD: 10, Cd: 0.02, Cl: 0.6 }, "front"),
    run("r2", 2, 1, { LD: 16.5, Cd: 0.03, Cl: 0.7 }, "front"),
    run("r3", 3, 2, { LD: 8, Cd: 0.025, Cl: 0.55 }, "dominated"),
    run("r4", 4, 2, { LD: 16, Cd: 0.01, Cl: 0.42 }, "infeasible"),
    run("r5", 5, 3, { LD: 12, Cd: null, Cl: 0.6 }, "infeasible"),
    run("r12", 12, 3, { LD: 14.2, Cd: 0.021, Cl: 0.65 }, "front"),
  ],
};

/** The same study's runs traded off over LD, Cd and Cl, none of them constrained. */
const THREE = {
  ...ANSWER,
  objectives: [...ANSWER.objectives, { name: "Cl", direction: "max" }],
  constraints: [],
  history: [],
  progress: null,
  runs: ANSWER.runs.map((r) => ({ ...r, batch: null })),
};

type Trace = {
  type: string;
  name: string;
  mode: string;
  x: number[];
  y: number[];
  z?: number[];
  text: string[];
  customdata: string[];
  marker: { symbol?: string };
  line?: { shape?: string };
};
type Axis = { title: { text: string } };
type Layout = { xaxis?: Axis; yaxis?: Axis; scene?: { xaxis: Axis; yaxis: Axis; zaxis: Axis } };

/** What Plotly was last asked to draw in the front's plot (not the hypervolume's). */
function drawn(): { traces: Trace[]; layout: Layout } {
  const figure = screen.getByTestId("pareto-plot");
  const calls = vi
    .mocked(Plotly.react)
    .mock.calls.filter(([el]) => el instanceof HTMLElement && figure.contains(el));
  const last = calls[calls.length - 1]!;
  return { traces: last[1] as unknown as Trace[], layout: last[2] as unknown as Layout };
}

const trace = (name: string) => drawn().traces.find((t) => t.name === name);

/** Pick an option of a select from its own list. */
async function pick(input: HTMLElement, name: string) {
  await userEvent.click(input);
  const listbox = await waitFor(() => {
    const found = document.getElementById(input.getAttribute("aria-controls") ?? "");
    expect(found).not.toBeNull();
    return found!;
  });
  fireEvent.click(within(listbox).getByRole("option", { name, hidden: true }));
}

const objectivesAsked = (calls: { url: URL }[]) =>
  calls.map((c) => c.url.searchParams.get("objectives"));

describe("ParetoFrontPanel", () => {
  it("draws the front solid along LD, the dominated runs faded and the infeasible as crosses", async () => {
    mockApi({ [PATH]: () => ANSWER });
    renderWithApp(
      <ParetoFrontPanel studyId="s1" objectives={["LD", "Cd", "Cl"]} completed={6} planned />,
    );
    await screen.findByTestId("pareto-plot");
    await waitFor(() => expect(trace("on the front")).toBeDefined());

    const front = trace("on the front")!;
    expect(front.type).toBe("scatter");
    // in order of LD, joined by the staircase of what the front dominates
    expect(front.x).toEqual([10, 14.2, 16.5]);
    expect(front.y).toEqual([0.02, 0.021, 0.03]);
    expect(front.mode).toBe("lines+markers");
    expect(front.line?.shape).toBe("vh");
    expect(front.customdata).toEqual(["r1", "r12", "r2"]);
    expect(front.text[1]).toBe("run 12 · batch 3 · LD 14.2 · Cd 0.021 · Cl 0.65");

    expect(trace("dominated")!.customdata).toEqual(["r3"]);
    const infeasible = trace("infeasible")!;
    expect(infeasible.marker.symbol).toBe("x");
    // run 5 has no Cd: it has no place on the plot
    expect(infeasible.customdata).toEqual(["r4"]);
    expect(infeasible.text[0]).toBe(
      "run 4 · batch 2 · LD 16 · Cd 0.01 · Cl 0.42<br>infeasible: Cl 0.42, needs ≥ 0.5",
    );

    const { layout } = drawn();
    expect(layout.xaxis?.title.text).toBe("LD (max ↑)");
    expect(layout.yaxis?.title.text).toBe("Cd (min ↓)");
  });

  it("sums the front up in words, with its constraints and its hypervolume after each batch", async () => {
    mockApi({ [PATH]: () => ANSWER });
    renderWithApp(
      <ParetoFrontPanel studyId="s1" objectives={["LD", "Cd", "Cl"]} completed={6} planned />,
    );
    expect(await screen.findByTestId("pareto-summary")).toHaveTextContent(
      "3 runs on the front of 4 feasible (6 completed, 1 without a value of LD or Cd) · hypervolume 83 % of the box",
    );
    expect(screen.getByTestId("pareto-constraints")).toHaveTextContent("Within Cl ≥ 0.5");
    expect(screen.getByRole("figure", { name: "Pareto front of LD and Cd" })).toBeInTheDocument();
    expect(
      screen.getByRole("figure", { name: "Hypervolume after each batch" }),
    ).toHaveAccessibleDescription("hypervolume: 3 points, x from 1 to 3, last value 83.");
    expect(screen.getByTestId("pareto-progress")).toHaveTextContent("batch 3 of ≤ 5, 6 of 10 runs");
  });

  it("shows a study's own trade-off without asking which objectives", async () => {
    const { calls } = mockApi({ [PATH]: () => ANSWER });
    renderWithApp(
      <ParetoFrontPanel studyId="s1" objectives={["LD", "Cd", "Cl"]} completed={6} planned />,
    );
    await screen.findByTestId("pareto-summary");
    expect(screen.queryByRole("textbox", { name: "x" })).toBeNull();
    expect(screen.queryByTestId("pareto-objectives")).toBeNull();
    expect(objectivesAsked(calls)).toEqual([null]);
  });

  it("asks for the objectives picked, and which way each is better", async () => {
    const { calls } = mockApi({
      [PATH]: (url) =>
        url.searchParams.get("objectives")?.split(",").length === 3 ? THREE : ANSWER,
    });
    renderWithApp(<ParetoFrontPanel studyId="s1" objectives={["LD", "Cd", "Cl"]} completed={6} />);
    await screen.findByTestId("pareto-summary");
    // the first two objectives, both maximised
    expect(objectivesAsked(calls)).toEqual(["LD:max,Cd:max"]);
    expect(screen.getByRole("textbox", { name: "x" })).toHaveValue("LD");
    expect(screen.getByRole("textbox", { name: "y" })).toHaveValue("Cd");

    const cd = screen.getByRole("radiogroup", { name: "Maximise or minimise Cd" });
    await userEvent.click(within(cd).getByText("min ↓"));
    await waitFor(() => expect(objectivesAsked(calls)).toContain("LD:max,Cd:min"));

    await pick(screen.getByRole("textbox", { name: "z" }), "Cl");
    await waitFor(() => expect(objectivesAsked(calls)).toContain("LD:max,Cd:min,Cl:max"));
    await waitFor(() => expect(trace("on the front")?.type).toBe("scatter3d"));
  });

  it("draws three objectives in 3-D, front, dominated and infeasible apart", async () => {
    mockApi({
      [PATH]: () => ({
        ...THREE,
        runs: THREE.runs.map((r) =>
          r.id === "r4" ? { ...r, values: { ...r.values, Cd: 0.04 }, feasible: false } : r,
        ),
      }),
    });
    renderWithApp(
      <ParetoFrontPanel studyId="s1" objectives={["LD", "Cd", "Cl"]} completed={6} planned />,
    );
    await screen.findByRole("figure", { name: "Pareto front of LD, Cd and Cl" });
    await waitFor(() => expect(trace("on the front")).toBeDefined());
    const { traces, layout } = drawn();
    expect(traces.map((t) => [t.type, t.name])).toEqual([
      ["scatter3d", "infeasible"],
      ["scatter3d", "dominated"],
      ["scatter3d", "on the front"],
    ]);
    const front = trace("on the front")!;
    expect(front.z).toEqual([0.6, 0.65, 0.7]);
    expect(front.mode).toBe("markers");
    expect(front.text[0]).toBe("run 1 · LD 10 · Cd 0.02 · Cl 0.6");
    expect(layout.scene?.zaxis.title.text).toBe("Cl (max ↑)");
    // no batches: no hypervolume history
    expect(screen.queryByRole("figure", { name: "Hypervolume after each batch" })).toBeNull();
  });

  it("opens the run whose point is clicked", async () => {
    // a drawn plot takes listeners: keep each plot's click
    type Click = (ev: { points: { customdata: unknown }[] }) => void;
    const clicks = new Map<HTMLElement, Click>();
    vi.mocked(Plotly.react).mockImplementation(((el: HTMLElement) => {
      Object.assign(el, {
        on: (_event: string, f: Click) => clicks.set(el, f),
        removeAllListeners: () => {},
      });
      return Promise.resolve(el);
    }) as unknown as typeof Plotly.react);
    mockApi({ [PATH]: () => ANSWER });
    const onRunClick = vi.fn();
    renderWithApp(
      <ParetoFrontPanel
        studyId="s1"
        objectives={["LD", "Cd", "Cl"]}
        completed={6}
        planned
        onRunClick={onRunClick}
      />,
    );
    const figure = await screen.findByTestId("pareto-plot");
    const click = await waitFor(() => {
      const found = [...clicks].find(([el]) => figure.contains(el));
      expect(found).toBeDefined();
      return found![1];
    });
    click({ points: [{ customdata: "r12" }] });
    expect(onRunClick).toHaveBeenCalledWith("r12");
  });

  it("draws an optimisation within constraints against the constrained objective", async () => {
    mockApi({
      [PATH]: () => ({
        ...ANSWER,
        objectives: [{ name: "LD", direction: "max" }],
        front_size: 1,
        runs: ANSWER.runs.map((r) => ({ ...r, front: r.id === "r2" })),
      }),
    });
    renderWithApp(
      <ParetoFrontPanel studyId="s1" objectives={["LD", "Cd", "Cl"]} completed={6} planned />,
    );
    await screen.findByRole("figure", { name: "Best LD within Cl ≥ 0.5" });
    await waitFor(() => expect(trace("on the front")).toBeDefined());
    expect(trace("on the front")!.x).toEqual([0.7]);
    expect(trace("on the front")!.y).toEqual([16.5]);
    expect(drawn().layout.xaxis?.title.text).toBe("Cl (≥ 0.5)");
    expect(drawn().layout.yaxis?.title.text).toBe("LD (max ↑)");
  });

  it("says so while no completed run has both values", async () => {
    mockApi({
      [PATH]: () => ({
        ...ANSWER,
        completed: 1,
        missing: 1,
        feasible: 0,
        front_size: 0,
        hypervolume: null,
        hypervolume_share: null,
        reference: null,
        history: [],
        runs: [run("r1", 1, 1, { LD: 10, Cd: null, Cl: 0.6 }, "infeasible")],
      }),
    });
    renderWithApp(
      <ParetoFrontPanel studyId="s1" objectives={["LD", "Cd", "Cl"]} completed={1} planned />,
    );
    expect(
      await screen.findByRole("figure", { name: "Pareto front of LD and Cd" }),
    ).toHaveAccessibleDescription("No completed run has values of both LD and Cd yet.");
    expect(screen.getByTestId("pareto-summary")).toHaveTextContent(
      "0 runs on the front of 0 feasible (1 completed, 1 without a value of LD or Cd)",
    );
  });

  it("asks again as runs complete, the last front shown meanwhile", async () => {
    let answer: (v: unknown) => void = () => {};
    const { calls } = mockApi({
      [PATH]: () => (calls.length === 1 ? ANSWER : new Promise((resolve) => (answer = resolve))),
    });
    const view = renderWithApp(
      <ParetoFrontPanel studyId="s1" objectives={["LD", "Cd", "Cl"]} completed={6} planned />,
    );
    await screen.findByTestId("pareto-summary");
    view.rerender(
      <ParetoFrontPanel studyId="s1" objectives={["LD", "Cd", "Cl"]} completed={7} planned />,
    );
    await waitFor(() => expect(calls).toHaveLength(2));
    expect(screen.queryByTestId("pareto-loading")).toBeNull();
    expect(screen.getByTestId("pareto-summary")).toHaveTextContent("6 completed");
    answer({ ...ANSWER, completed: 7, feasible: 5 });
    await waitFor(() =>
      expect(screen.getByTestId("pareto-summary")).toHaveTextContent(
        "3 runs on the front of 5 feasible (7 completed",
      ),
    );
  });

  it("says why it cannot find the front, in the API's words", async () => {
    const message = "objectives: the study has no objective 'LD'; it has Cl, Cd";
    mockApi({ [PATH]: { status: 400, body: { code: "invalid", field: "objectives", message } } });
    renderWithApp(<ParetoFrontPanel studyId="s1" objectives={["LD", "Cd"]} completed={6} />);
    expect(await screen.findByRole("alert")).toHaveTextContent(message);
    expect(screen.queryByTestId("pareto-loading")).toBeNull();
    // the objectives can still be changed
    expect(screen.getByRole("textbox", { name: "x" })).toHaveValue("LD");
  });
});

describe("isFrontStudy", () => {
  const spec = { name: "wing", combine: "adaptive" as const };
  it("is an adaptive study after a front: goal pareto, or constraints", () => {
    expect(isFrontStudy({ ...spec, adaptive: { budget: 10, goal: "pareto" } })).toBe(true);
    expect(
      isFrontStudy({
        ...spec,
        adaptive: { budget: 10, goal: "optimise", constraints: { Cl: { min: 0.5 } } },
      }),
    ).toBe(true);
    expect(isFrontStudy({ ...spec, adaptive: { budget: 10, goal: "map" } })).toBe(false);
    expect(isFrontStudy({ name: "sweep" })).toBe(false);
  });
});
