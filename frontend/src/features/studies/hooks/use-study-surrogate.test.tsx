import { screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { type FakeSocket, stubWebSockets } from "@/test/fake-socket";
import { mockApi, renderWithApp } from "@/test/render";
import { useStudySurrogate } from "./use-runs-table";

let sockets: FakeSocket[] = [];
beforeEach(() => {
  sockets = stubWebSockets();
});
afterEach(() => {
  vi.restoreAllMocks();
});

const QUERY = { size: 20 };

/** A map study of a budget of 3 runs with `runs` of them made: the last batch makes the 3rd. */
function surrogate(runs: number) {
  return {
    progress: {
      goal: "map",
      objectives: ["u_min"],
      batch: runs > 2 ? 2 : 1,
      max_batches: 2,
      runs,
      budget: 3,
    },
    parameters: [],
    grid: null,
    samples: [],
    values: {},
  };
}

function Progress({ active }: { active: boolean }) {
  const surrogate = useStudySurrogate("s1", QUERY, { active });
  const p = surrogate.data?.progress;
  return <output data-testid="progress">{p ? `${p.runs} of ${p.budget} runs` : "…"}</output>;
}

it("reads an adaptive study's surrogate once more when the study ends, for a batch it may have missed", async () => {
  let runs = 2;
  const { calls } = mockApi({
    "GET /api/v1/studies/s1/surrogate/": () => surrogate(runs),
  });
  const { rerender } = renderWithApp(<Progress active />);
  await waitFor(() => expect(screen.getByTestId("progress")).toHaveTextContent("2 of 3 runs"));
  expect(sockets.length).toBeGreaterThan(0);
  // the last batch ran and the study ended, but no event of it reached this page
  runs = 3;
  const before = calls.length;
  rerender(<Progress active={false} />);
  await waitFor(() => expect(screen.getByTestId("progress")).toHaveTextContent("3 of 3 runs"));
  expect(calls.length).toBe(before + 1);
});

it("reads the surrogate once more when the study ends while a slow first answer is on its way", async () => {
  let runs = 2;
  let answer: (() => void) | null = null;
  const { calls } = mockApi({
    "GET /api/v1/studies/s1/surrogate/": async () => {
      const shown = runs; // the answer as the server computed it when asked
      if (calls.length === 1) await new Promise<void>((resolve) => (answer = resolve));
      return surrogate(shown);
    },
  });
  const { rerender } = renderWithApp(<Progress active />);
  await waitFor(() => expect(answer).not.toBeNull());
  // the last batch ran and the study ended while the first answer was being computed
  runs = 3;
  rerender(<Progress active={false} />);
  answer!();
  await waitFor(() => expect(screen.getByTestId("progress")).toHaveTextContent("3 of 3 runs"));
  expect(calls.length).toBe(2);
});
