import { screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { emptyForm, type WizardForm } from "../lib/form";
import { StudyWizard } from "./study-wizard";

afterEach(() => vi.restoreAllMocks());

function wizard(initial: WizardForm) {
  mockApi({ "POST /api/v1/studies/preview/": () => new Promise(() => {}) });
  return renderWithApp(
    <StudyWizard
      templates={[]}
      packages={[]}
      backends={[]}
      initial={initial}
      editId={null}
      renderTemplatePicker={() => <div>templates</div>}
      onSaved={() => {}}
    />,
  );
}

describe("StudyWizard", () => {
  it("on an empty form says what the preview waits for, not 'fix 1 marked field'", () => {
    wizard(emptyForm());
    const panel = screen.getByTestId("preview-panel");
    expect(panel).not.toHaveTextContent(/marked field/);
    expect(screen.getByTestId("preview-waiting")).toHaveTextContent(
      "The preview appears once you pick a template, or upload a case.",
    );
  });

  it("shows a bad objective name under the name, not under its definition", async () => {
    wizard({
      ...emptyForm(),
      objectives: [
        {
          key: "k1",
          name: "L/D",
          kind: "expr",
          series: "",
          reduce: "last",
          n: "20",
          expr: "Cl / Cd",
        },
      ],
    });
    await userEvent.click(screen.getByTestId("step-3"));
    const name = screen.getByRole("textbox", { name: "Objective name" });
    expect(name).toHaveAccessibleDescription(/names are identifiers/);
    expect(screen.getByRole("textbox", { name: "L/D expression" })).not.toHaveAccessibleDescription(
      /names are identifiers/,
    );
  });

  it("gives a step left behind a tick only when nothing on it is missing", async () => {
    wizard({ ...emptyForm(), template: "cavity" });
    await userEvent.click(screen.getByTestId("next-step"));
    const caseStep = screen.getByTestId("step-0");
    expect(caseStep).toHaveAttribute("data-done", "false");
    expect(caseStep).toHaveTextContent("not finished");
    await userEvent.click(screen.getByTestId("step-0"));
    await userEvent.type(screen.getByTestId("study-name"), "Lid speeds");
    await userEvent.click(screen.getByTestId("next-step"));
    expect(screen.getByTestId("step-0")).toHaveAttribute("data-done", "true");
    expect(screen.getByTestId("step-0")).not.toHaveTextContent("not finished");
  });

  it("before a case is uploaded (or after one was refused) asks for the case, marks nothing else", () => {
    wizard({ ...emptyForm(), source: "upload" });
    expect(screen.getByTestId("preview-panel")).not.toHaveTextContent(/marked field/);
    expect(screen.getByTestId("preview-waiting")).toHaveTextContent(
      "The preview appears once you upload a case archive (.tar.gz, .tgz or .zip).",
    );
    expect(screen.getByTestId("step-2")).not.toHaveTextContent("to fix");
  });

  it("names the step a marked field is on when it is not the one shown", () => {
    wizard({ ...emptyForm(), template: "cavity", memoryGb: 0 });
    expect(screen.getByTestId("preview-panel")).toHaveTextContent(
      "Fix 1 marked field on Run configuration to update the preview.",
    );
  });
});
