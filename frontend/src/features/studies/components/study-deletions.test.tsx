import { screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { renderWithApp } from "@/test/render";
import { StudyDeletions } from "./study-deletions";

describe("StudyDeletions", () => {
  it("shows how far each study's deletion is", () => {
    renderWithApp(
      <StudyDeletions
        deletions={[{ id: "a", name: "wing map", runs_total: 100_000, runs_deleted: 40_000 }]}
      />,
    );
    expect(screen.getByText("Deleting “wing map”")).toBeTruthy();
    expect(screen.getByTestId("deletion-progress").textContent).toBe(
      "40,000 of 100,000 runs removed",
    );
    expect(screen.getByLabelText("40,000 of 100,000 runs of “wing map” removed")).toBeTruthy();
  });

  it("shows nothing while no study is being deleted", () => {
    renderWithApp(<StudyDeletions deletions={[]} />);
    expect(screen.queryByText(/Deleting/)).toBeNull();
  });
});
