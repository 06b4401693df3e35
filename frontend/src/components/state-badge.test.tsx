import { screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { renderWithApp } from "@/test/render";
import { StudyStateBadge, TrustBadge } from "./state-badge";

describe("TrustBadge", () => {
  it("says a run at its iteration cap is not converged, with the server's evidence", async () => {
    renderWithApp(
      <TrustBadge
        trust="iteration_limit"
        detail={{ basis: "iteration_limit", why: "it ran to its iteration limit (p = 0.0001)" }}
      />,
    );
    const badge = screen.getByText("Iteration limit");
    await userEvent.hover(badge);
    expect(await screen.findByRole("tooltip")).toHaveTextContent(
      "it ran to its iteration limit (p = 0.0001)",
    );
  });

  it("names who declared convergence, and never cites a policy the study has not", async () => {
    renderWithApp(
      <TrustBadge
        trust="converged"
        detail={{ basis: "solver", why: "the solver met its own tolerance (residualControl)" }}
      />,
    );
    const badge = screen.getByText(/Converged/);
    expect(badge).toHaveTextContent("Converged · solver tolerance");
    await userEvent.hover(badge);
    const tip = await screen.findByRole("tooltip");
    expect(tip).toHaveTextContent("residualControl");
    expect(tip).not.toHaveTextContent("policy");
  });
});

describe("StudyStateBadge", () => {
  it("calls a study none of whose runs succeeded failed, not partly failed", () => {
    renderWithApp(
      <>
        <StudyStateBadge
          state="completed_with_failures"
          progress={{ completed: 0, failed: 1, cancelled: 0 }}
        />
        <StudyStateBadge
          state="completed_with_failures"
          progress={{ completed: 3, failed: 1, cancelled: 0 }}
        />
      </>,
    );
    expect(screen.getByText("Failed")).toBeInTheDocument();
    expect(screen.getByText("Partly failed")).toBeInTheDocument();
  });

  it("calls a study whose only missing runs were cancelled partly cancelled, not failed", () => {
    renderWithApp(
      <StudyStateBadge
        state="completed_with_failures"
        progress={{ completed: 4, failed: 0, cancelled: 1 }}
      />,
    );
    expect(screen.getByText("Partly cancelled")).toBeInTheDocument();
    expect(screen.queryByText("Partly failed")).not.toBeInTheDocument();
  });
});
