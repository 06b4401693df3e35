import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import Plotly from "plotly.js-dist-min";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { SensitivityPanel } from "./sensitivity";

beforeEach(() => {
  vi.mocked(Plotly.react).mockClear();
});

afterEach(() => {
  vi.restoreAllMocks();
});

const PATH = "GET /api/v1/studies/s1/sensitivity/";

const ANSWER = {
  samples: 4096,
  confidence: 0.95,
  runs_needed: 8,
  parameters: [
    { name: "aoa", min: -4, max: 12, unit: "deg" },
    { name: "speed", min: 10, max: 40, unit: "m/s" },
    { name: "flap", min: 0, max: 20, unit: "deg" },
  ],
  objectives: [
    {
      name: "Cl",
      runs: 20,
      indices: [
        {
          parameter: "aoa",
          first: 0.31,
          first_interval: [0.28, 0.34],
          total: 0.56,
          total_interval: [0.5, 0.61],
        },
        {
          parameter: "speed",
          first: 0.01,
          first_interval: [0, 0.02],
          total: 0.02,
          total_interval: [0, 0.04],
        },
        {
          parameter: "flap",
          first: 0.4,
          first_interval: [0.36, 0.44],
          total: 0.66,
          total_interval: [0.6, 0.7],
        },
      ],
    },
    {
      name: "Cm",
      runs: 20,
      indices: [
        {
          parameter: "aoa",
          first: 0.1,
          first_interval: [0.05, 0.15],
          total: 0.2,
          total_interval: [0.15, 0.25],
        },
        {
          parameter: "speed",
          first: 0.7,
          first_interval: [0.65, 0.75],
          total: 0.75,
          total_interval: [0.7, 0.8],
        },
        {
          parameter: "flap",
          first: 0,
          first_interval: [0, 0.01],
          total: 0.01,
          total_interval: [0, 0.02],
        },
      ],
    },
  ],
  skipped: [{ name: "Cd", runs: 3, reason: "3 of the 8 runs it needs" }],
};

type Bar = { name: string; x: number[]; y: string[]; customdata: string[]; orientation: string };

/** The bars Plotly was last asked to draw. */
function drawn(): Bar[] {
  const calls = vi.mocked(Plotly.react).mock.calls;
  return calls[calls.length - 1]![1] as Bar[];
}

describe("SensitivityPanel", () => {
  it("shows a loader while the surrogate is fitted, then a bar per parameter by total index", async () => {
    let answer: (v: unknown) => void = () => {};
    const pending = new Promise((resolve) => (answer = resolve));
    const { calls } = mockApi({ [PATH]: () => pending });
    renderWithApp(<SensitivityPanel studyId="s1" />);
    expect(await screen.findByTestId("sensitivity-loading")).toBeInTheDocument();
    answer(ANSWER);
    expect(await screen.findByTestId("sensitivity-plot")).toBeInTheDocument();
    expect(screen.queryByTestId("sensitivity-loading")).toBeNull();
    // every objective at once: switching between them asks nothing more
    expect(calls).toHaveLength(1);
    expect(calls[0]?.url.searchParams.get("objective")).toBeNull();

    await waitFor(() => expect(Plotly.react).toHaveBeenCalled());
    const [first, total] = drawn();
    expect(first!.name).toBe("first-order (S)");
    expect(total!.name).toBe("total (ST)");
    expect(first!.orientation).toBe("h");
    expect(total!.y).toEqual(["flap", "aoa", "speed"]);
    expect(total!.x).toEqual([0.66, 0.56, 0.02]);
    expect(first!.x).toEqual([0.4, 0.31, 0.01]);
    expect(first!.customdata[1]).toBe("S 0.31 [0.28, 0.34] · ST 0.56 [0.50, 0.61]");

    expect(screen.getByText(/ST ≈ 0 can be fixed/)).toBeInTheDocument();
    expect(screen.getByTestId("sensitivity-caption")).toHaveTextContent(
      "On a surrogate of 20 completed runs; 95 % intervals from 4096 samples.",
    );
  });

  it("names the objectives without enough runs yet", async () => {
    mockApi({ [PATH]: () => ANSWER });
    renderWithApp(<SensitivityPanel studyId="s1" />);
    expect(await screen.findByTestId("sensitivity-skipped")).toHaveTextContent(
      "Cd: not yet (3 of the 8 runs it needs)",
    );
  });

  it("shows another objective's indices when it is picked", async () => {
    mockApi({ [PATH]: () => ANSWER });
    renderWithApp(<SensitivityPanel studyId="s1" />);
    await screen.findByTestId("sensitivity-plot");
    await userEvent.click(screen.getByText("Cm"));
    await waitFor(() => expect(drawn()[1]!.y).toEqual(["speed", "aoa", "flap"]));
    expect(screen.getByRole("figure")).toHaveAccessibleName("Sensitivity of Cm to the parameters");
  });

  it("has no objective selector for a single objective", async () => {
    mockApi({ [PATH]: () => ({ ...ANSWER, objectives: ANSWER.objectives.slice(0, 1) }) });
    renderWithApp(<SensitivityPanel studyId="s1" />);
    await screen.findByTestId("sensitivity-plot");
    expect(screen.queryByTestId("sensitivity-objective")).toBeNull();
  });

  it("says quietly that a study varying no number over a range has nothing to show", async () => {
    mockApi({
      [PATH]: {
        status: 400,
        body: {
          code: "invalid",
          field: "parameters",
          message: "the study varies no number over a range",
        },
      },
    });
    renderWithApp(<SensitivityPanel studyId="s1" />);
    expect(await screen.findByTestId("sensitivity-none")).toBeInTheDocument();
    expect(screen.queryByTestId("sensitivity-refused")).toBeNull();
    expect(screen.queryByRole("alert")).toBeNull();
  });

  it("says why it cannot compute, in the API's words", async () => {
    const message = "samples must be a power of two from 256 to 65536";
    mockApi({ [PATH]: { status: 400, body: { code: "invalid", field: "samples", message } } });
    renderWithApp(<SensitivityPanel studyId="s1" />);
    expect(await screen.findByTestId("sensitivity-refused")).toHaveTextContent(message);
  });
});
