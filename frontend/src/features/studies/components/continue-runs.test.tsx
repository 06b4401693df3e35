import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { ContinueSelectedButton } from "./continue-runs";

afterEach(() => vi.restoreAllMocks());

const IDS = ["r1", "r2", "r4"];

async function openForm(ids = IDS) {
  renderWithApp(<ContinueSelectedButton studyId="s1" runIds={ids} />);
  await userEvent.click(screen.getByRole("button", { name: "Continue selected…" }));
  return within(await screen.findByRole("form", { name: `Continue ${ids.length} selected runs` }));
}

const posts = (calls: { method: string; body: unknown }[]) =>
  calls.filter((c) => c.method === "POST").map((c) => c.body);

describe("ContinueSelectedButton", () => {
  it("is disabled until runs are ticked", () => {
    renderWithApp(<ContinueSelectedButton studyId="s1" runIds={[]} />);
    expect(screen.getByRole("button", { name: "Continue selected…" })).toBeDisabled();
  });

  it("sends the ticked runs with the iterations and settings, then says how many went on and why the others did not", async () => {
    const { calls } = mockApi({
      "POST /api/v1/studies/s1/runs/continue/": {
        status: 202,
        body: {
          continued: ["r1", "r2"],
          skipped: [
            { run: "r4", index: 4, reason: "the run is running: a run goes on once it has ended" },
          ],
        },
      },
    });
    const form = await openForm();
    await userEvent.type(form.getByLabelText(/Iterations to add/), "1000");
    await userEvent.click(form.getByRole("button", { name: /Change settings/ }));
    await userEvent.click(
      form.getByRole("button", { name: "fvSolution relaxationFactors.equations.U = 0.5" }),
    );
    await userEvent.click(form.getByRole("button", { name: "Continue 3 selected runs" }));

    const result = await screen.findByTestId("continue-result");
    expect(result).toHaveTextContent("2 runs continue; 1 skipped");
    const skipped = screen.getAllByTestId("skipped-run");
    expect(skipped.map((s) => s.textContent)).toEqual([
      "Run 4: the run is running: a run goes on once it has ended",
    ]);
    expect(within(skipped[0]!).getByRole("link", { name: "Run 4" })).toHaveAttribute(
      "href",
      "/runs/r4",
    );
    expect(posts(calls)).toEqual([
      {
        runs: IDS,
        iterations: 1000,
        settings: { fvSolution: { "relaxationFactors.equations.U": "0.5" } },
      },
    ]);
  });

  it("restarts from a write time typed for all of them, without iterations", async () => {
    const { calls } = mockApi({
      "POST /api/v1/studies/s1/runs/continue/": {
        status: 202,
        body: { continued: IDS, skipped: [] },
      },
    });
    const form = await openForm();
    await userEvent.click(form.getByRole("button", { name: "Continue 3 selected runs" }));
    expect(
      form.getByText("give the time steps to add, or restart from an earlier write"),
    ).toBeVisible();
    expect(posts(calls)).toEqual([]);
    await userEvent.type(form.getByRole("textbox", { name: "From write" }), "0.2");
    await userEvent.click(form.getByRole("button", { name: "Continue 3 selected runs" }));
    expect(await screen.findByTestId("continue-result")).toHaveTextContent(
      "3 runs continue; 0 skipped",
    );
    expect(screen.queryByTestId("skipped-runs")).toBeNull();
    expect(posts(calls)).toEqual([{ runs: IDS, time: "0.2" }]);
  });

  it("lists every run the API refused when none can go on, keeping what was typed", async () => {
    mockApi({
      "POST /api/v1/studies/s1/runs/continue/": {
        status: 400,
        body: {
          code: "invalid",
          message: "none of the 2 runs can go on; run 1: the run never wrote time 0.7 completely",
          field: "runs",
          details: {
            skipped: [
              { run: "r1", index: 1, reason: "the run never wrote time 0.7 completely" },
              {
                run: "r2",
                index: 2,
                reason: "the run is pending: a run goes on once it has ended",
              },
            ],
          },
        },
      },
    });
    const form = await openForm(["r1", "r2"]);
    await userEvent.type(form.getByLabelText(/Iterations to add/), "50");
    await userEvent.type(form.getByRole("textbox", { name: "From write" }), "0.7");
    await userEvent.click(form.getByRole("button", { name: "Continue 2 selected runs" }));

    expect(await form.findByTestId("continue-error")).toHaveTextContent(
      "none of the 2 runs can go on; run 1: the run never wrote time 0.7 completely",
    );
    expect(form.getAllByTestId("skipped-run").map((s) => s.textContent)).toEqual([
      "Run 1: the run never wrote time 0.7 completely",
      "Run 2: the run is pending: a run goes on once it has ended",
    ]);
    expect(form.getByLabelText(/Iterations to add/)).toHaveValue("50");
    expect(form.getByRole("textbox", { name: "From write" })).toHaveValue("0.7");
  });

  it("shows the API's refusal of the write time under that field", async () => {
    mockApi({
      "POST /api/v1/studies/s1/runs/continue/": {
        status: 400,
        body: {
          code: "invalid",
          message: 'time: "latest", or one of the run\'s write times (its page lists them)',
          field: "time",
        },
      },
    });
    const form = await openForm();
    await userEvent.type(form.getByRole("textbox", { name: "From write" }), "soon");
    await userEvent.click(form.getByRole("button", { name: "Continue 3 selected runs" }));
    await waitFor(() =>
      expect(form.getByRole("textbox", { name: "From write" })).toHaveAttribute(
        "aria-invalid",
        "true",
      ),
    );
    expect(
      form.getByText('"latest", or one of the run\'s write times (its page lists them)'),
    ).toBeVisible();
    expect(form.queryByTestId("continue-error")).toBeNull();
  });
});
