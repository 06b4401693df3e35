import { screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Study } from "@/lib/types";
import { renderWithApp } from "@/test/render";
import { progressSummary } from "./progress-summary";
import { StudyProgress } from "./study-progress";

function progress(by: Record<string, number>): Study["progress"] {
  const total = Object.values(by).reduce((a, b) => a + b, 0);
  return { total, by_state: by } as unknown as Study["progress"];
}

describe("StudyProgress", () => {
  it("says a cancelled study's runs were cancelled, not that it is 100 % done", () => {
    const p = progress({ completed: 7, failed: 2, cancelled: 9991 });
    renderWithApp(<StudyProgress progress={p} />);
    expect(screen.getByText("7 completed · 2 failed · 9,991 cancelled of 10,000")).toBeTruthy();
    expect(screen.queryByText(/100%|done/)).toBeNull();
    expect(screen.getByLabelText("7 of 10,000 runs completed")).toBeTruthy();
  });

  it("counts a large cancel down while its queued runs are ended in the background", () => {
    const p = {
      ...progress({ cancelled: 100_000 }),
      cancelled: 100_000,
      cancelling: 60_000,
    } as Study["progress"];
    renderWithApp(<StudyProgress progress={p} />);
    expect(screen.getByTestId("cancelling").textContent).toBe("cancelling: 40,000 of 100,000");
    expect(screen.getByText("100,000 cancelled of 100,000")).toBeTruthy();
  });

  it("says nothing of cancelling once the cancel is done", () => {
    const p = { ...progress({ cancelled: 5 }), cancelled: 5, cancelling: 0 } as Study["progress"];
    renderWithApp(<StudyProgress progress={p} />);
    expect(screen.queryByTestId("cancelling")).toBeNull();
  });

  it("names nothing ended while every run waits or runs", () => {
    expect(progressSummary(progress({ pending: 40, running: 2 }))).toBe("none ended of 42");
    expect(progressSummary(progress({}), 18)).toBe("none ended of 18");
  });
});
