import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RunDetail } from "@/lib/types";
import { mockApi, renderWithApp } from "@/test/render";
import { runKeys } from "../hooks/use-run";
import { ContinueRunButton } from "./continue-run";

afterEach(() => vi.restoreAllMocks());

const run = {
  id: "r1",
  study: "s1",
  index: 3,
  state: "completed",
  attempt: 1,
  last_seq: 9,
  continuation: { writes: ["0.1", "0.2", "0.3"], problem: "", resumed_from: null },
} as unknown as RunDetail;

async function openForm(r: RunDetail = run) {
  renderWithApp(<ContinueRunButton run={r} />);
  await userEvent.click(screen.getByRole("button", { name: "Continue…" }));
  return within(await screen.findByRole("form", { name: /run 3$/ }));
}

/** Pick an option of a select: its own list (each select's list is portalled beside the modal). */
async function pick(input: HTMLElement, name: string) {
  await userEvent.click(input);
  const listbox = await waitFor(() => {
    const found = document.getElementById(input.getAttribute("aria-controls") ?? "");
    expect(found).not.toBeNull();
    return found!;
  });
  fireEvent.click(within(listbox).getByRole("option", { name, hidden: true }));
}

const posts = (calls: { method: string; body: unknown }[]) =>
  calls.filter((c) => c.method === "POST").map((c) => c.body);

describe("ContinueRunButton", () => {
  it("asks for the iterations to add to a run that completed, and sends nothing until given", async () => {
    const { calls } = mockApi({});
    const form = await openForm();
    await userEvent.click(form.getByRole("button", { name: "Continue run" }));
    expect(
      form.getByText("give the time steps to add, or restart from an earlier write"),
    ).toBeVisible();
    expect(form.getByLabelText(/Iterations to add/)).toHaveAttribute("aria-invalid", "true");
    await userEvent.type(form.getByLabelText(/Iterations to add/), "0");
    expect(form.getByText("a whole number from 1 to 10,000,000")).toBeVisible();
    expect(posts(calls)).toEqual([]);
  });

  it("offers the latest write and every earlier one, newest first", async () => {
    mockApi({});
    const form = await openForm();
    await userEvent.click(form.getByRole("textbox", { name: "From write" }));
    const options = await screen.findAllByRole("option", { hidden: true });
    expect(options.map((o) => o.textContent)).toEqual([
      "latest (time 0.3)",
      "time 0.3",
      "time 0.2",
      "time 0.1",
    ]);
  });

  it("sends the iterations, the earlier write and the changed settings as the API takes them, then shows the run queued", async () => {
    const { calls } = mockApi({
      "POST /api/v1/runs/r1/continue/": { status: 202, body: { ...run, state: "pending" } },
      "GET /api/v1/runs/r1/": () => ({ ...run, state: "pending" }),
    });
    renderWithApp(<ContinueRunButton run={run} />);
    await userEvent.click(screen.getByRole("button", { name: "Continue…" }));
    const form = within(await screen.findByRole("form", { name: "Continue run 3" }));
    await userEvent.type(form.getByLabelText(/Iterations to add/), "500");
    await pick(form.getByRole("textbox", { name: "From write" }), "time 0.1");

    await userEvent.click(form.getByRole("button", { name: /Change settings \(restart\)/ }));
    await userEvent.click(
      form.getByRole("button", { name: "fvSolution relaxationFactors.equations.U = 0.5" }),
    );
    await userEvent.click(form.getByRole("button", { name: "Add setting" }));
    await pick(form.getByRole("textbox", { name: "Setting 2 file" }), "controlDict");
    await userEvent.type(form.getByRole("textbox", { name: "Setting 2 key" }), "deltaT");
    await userEvent.type(form.getByRole("textbox", { name: "Setting 2 value" }), "0.0005");
    // an earlier write, or a changed setting, makes it a restart
    const restart = within(screen.getByRole("form", { name: "Restart run 3" }));
    await userEvent.click(restart.getByRole("button", { name: "Restart run" }));

    await waitFor(() => expect(screen.queryByRole("form")).toBeNull());
    expect(posts(calls)).toEqual([
      {
        iterations: 500,
        time: "0.1",
        settings: {
          fvSolution: { "relaxationFactors.equations.U": "0.5" },
          controlDict: { deltaT: "0.0005" },
        },
      },
    ]);
  });

  it("sends only the iterations when the run goes on from its latest write, and takes the run back pending", async () => {
    const { calls } = mockApi({
      "POST /api/v1/runs/r1/continue/": { status: 202, body: { ...run, state: "pending" } },
      "GET /api/v1/runs/r1/": () => ({ ...run, state: "pending" }),
    });
    const { client } = renderWithApp(<ContinueRunButton run={run} />);
    await userEvent.click(screen.getByRole("button", { name: "Continue…" }));
    const form = within(await screen.findByRole("form", { name: "Continue run 3" }));
    await userEvent.type(form.getByLabelText(/Iterations to add/), "2000");
    await userEvent.click(form.getByRole("button", { name: "Continue run" }));
    await waitFor(() => expect(posts(calls)).toEqual([{ iterations: 2000 }]));
    await waitFor(() =>
      expect(client.getQueryData<RunDetail>(runKeys.detail("r1"))?.state).toBe("pending"),
    );
  });

  it("shows the API's refusal under the setting it names and keeps everything typed", async () => {
    mockApi({
      "POST /api/v1/runs/r1/continue/": {
        status: 400,
        body: {
          code: "invalid",
          message:
            "settings.fvSolution.relaxationFactors.equations.U: 'half' is not allowed: numbers and words only",
          field: "settings.fvSolution.relaxationFactors.equations.U",
        },
      },
    });
    const form = await openForm();
    await userEvent.type(form.getByLabelText(/Iterations to add/), "300");
    await userEvent.click(form.getByRole("button", { name: /Change settings/ }));
    await userEvent.click(form.getByRole("button", { name: "Add setting" }));
    await userEvent.type(
      form.getByRole("textbox", { name: "Setting 1 key" }),
      "relaxationFactors.equations.U",
    );
    await userEvent.type(form.getByRole("textbox", { name: "Setting 1 value" }), "half");
    await userEvent.click(form.getByRole("button", { name: "Restart run" }));

    const value = form.getByRole("textbox", { name: "Setting 1 value" });
    await waitFor(() => expect(value).toHaveAttribute("aria-invalid", "true"));
    expect(form.getByText("'half' is not allowed: numbers and words only")).toBeVisible();
    expect(value).toHaveValue("half");
    expect(form.getByRole("textbox", { name: "Setting 1 key" })).toHaveValue(
      "relaxationFactors.equations.U",
    );
    expect(form.getByLabelText(/Iterations to add/)).toHaveValue("300");
    expect(form.queryByTestId("continue-error")).toBeNull();
  });

  it("shows a refusal that names no field of the form as an alert", async () => {
    mockApi({
      "POST /api/v1/runs/r1/continue/": {
        status: 400,
        body: {
          code: "invalid",
          message: "the study is cancelled: clone it instead",
          field: "run",
        },
      },
    });
    const form = await openForm();
    await userEvent.type(form.getByLabelText(/Iterations to add/), "10");
    await userEvent.click(form.getByRole("button", { name: "Continue run" }));
    expect(await form.findByTestId("continue-error")).toHaveTextContent(
      "the study is cancelled: clone it instead",
    );
    expect(form.getByLabelText(/Iterations to add/)).toHaveValue("10");
  });

  it("keeps what was typed when the form is closed and opened again", async () => {
    mockApi({});
    const form = await openForm();
    await userEvent.type(form.getByLabelText(/Iterations to add/), "750");
    await userEvent.click(form.getByRole("button", { name: "Cancel" }));
    await waitFor(() => expect(screen.queryByRole("form")).toBeNull());
    await userEvent.click(screen.getByRole("button", { name: "Continue…" }));
    const again = within(await screen.findByRole("form", { name: "Continue run 3" }));
    expect(again.getByLabelText(/Iterations to add/)).toHaveValue("750");
  });

  it("is disabled, saying why, when the run cannot go on", async () => {
    const problem =
      "the run ran on cloud (openstack), whose next attempt would not see this one's files";
    renderWithApp(
      <ContinueRunButton run={{ ...run, continuation: { ...run.continuation, problem } }} />,
    );
    const button = screen.getByRole("button", { name: "Continue…" });
    expect(button).toHaveAttribute("aria-disabled", "true");
    expect(button).toHaveAccessibleDescription(`Cannot go on: ${problem}`);
    await userEvent.click(button);
    expect(screen.queryByRole("form")).toBeNull();
  });

  it("is not offered while the run is active", () => {
    renderWithApp(<ContinueRunButton run={{ ...run, state: "running" }} />);
    expect(screen.queryByRole("button", { name: "Continue…" })).toBeNull();
  });
});
