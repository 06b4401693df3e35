/**
 * A mesh-independence study made in the wizard, in Debian's Chromium against the real stack
 * (PostgreSQL, Redis, Celery, the run agent and OpenFOAM): pitzDaily at three mesh levels
 * (0.3, 0.45, 0.675 of the tutorial's cells per direction, 60 iterations each) with warm
 * starts on. The tenant runs one run at a time, so each finer level starts from the coarser
 * one that completed before it, mapped onto its mesh by mapFields. The study page's Mesh
 * independence card reads the three levels and answers for both objectives; the finest run's
 * page says where it started from.
 */
import { expect, test, type Page } from "@playwright/test";
import { shootCard, signIn } from "./support";

const STUDY = `E2E pitzDaily mesh levels ${Date.now().toString(36)}`;

/** Choose a parameter row's mode (Fixed, List, …) in the wizard's parameter table. */
async function mode(page: Page, parameter: string, label: string) {
  await page.getByTestId(`param-${parameter}-mode`).click();
  await page.getByRole("option", { name: label, exact: true }).click();
}

test("a warm-started mesh study maps its finer levels and answers mesh independence", async ({
  page,
}) => {
  test.setTimeout(480_000);
  await signIn(page);

  await page.goto("/");
  await page.getByTestId("template-pitzdaily").click();
  await expect(page).toHaveURL(/\/studies\/new\?template=pitzdaily/);
  await page.getByTestId("study-name").fill(STUDY);
  await page.getByTestId("next-step").click();

  // the demo sweeps the inlet velocity: hold it at its default, vary the mesh instead
  await mode(page, "inlet_velocity", "Fixed");
  await mode(page, "mesh", "List");
  await page.getByTestId("param-mesh-values").fill("0.3, 0.45, 0.675");
  await page.getByTestId("param-iterations-value").fill("60");
  await expect(page.getByTestId("run-count")).toHaveText("3");
  await expect(page.getByTestId("preview-rows")).toContainText("0.675");

  await page.getByTestId("next-step").click(); // run configuration
  await expect(page.getByTestId("run-steps")).toContainText("simpleFoam");
  const warm = page.getByRole("switch", { name: "Warm start" });
  await expect(warm).not.toBeChecked();
  await expect(warm).toHaveAccessibleDescription(/across meshes through mapFields/);
  await warm.check();
  await expect(warm).toBeChecked();

  await page.getByTestId("next-step").click(); // objectives
  await page.getByTestId("next-step").click(); // review
  const yaml = page.getByTestId("spec-yaml");
  await expect(yaml).toContainText("template: pitzdaily");
  await expect(yaml).toContainText("warm_start: true");
  await expect(yaml).toContainText("- 0.675");
  await expect(page.getByTestId("submit-study")).toHaveText(/Submit 3 runs/);
  await page.getByTestId("submit-study").click();

  await expect(page).toHaveURL(/\/studies\/[0-9a-f-]{36}$/);
  const studyUrl = new URL(page.url()).pathname;
  await expect(page.getByRole("heading", { name: STUDY })).toBeVisible();
  await expect(page.getByTestId("count-completed")).toHaveText("Completed 3", {
    timeout: 360_000,
  });

  await page.getByTestId("mesh-independence-toggle").click();
  const panel = page.getByTestId("mesh-independence");
  await expect(panel.getByRole("textbox", { name: "Refinement parameter" })).toHaveValue("mesh");
  await expect(panel.getByRole("textbox", { name: "its value is" })).toHaveValue(
    "cells per direction",
  );
  // the three levels, fine to coarse, and a row for each objective: its GCI or why none
  await expect(panel).toContainText("Levels 0.675, 0.45, 0.3 of mesh (fine to coarse)");
  const table = page.getByTestId("mesh-independence-table");
  for (const objective of ["dp_static", "dp_total"])
    await expect(table.getByRole("cell", { name: objective, exact: true })).toBeVisible();
  await expect(table.getByRole("row")).toHaveCount(3); // the header and the two objectives
  if ((await table.locator('[data-testid^="gci-"]').count()) > 0) {
    // an objective with an order: its levels and the extrapolated value are drawn
    await expect(
      page.getByTestId("mesh-independence-plot").locator(".scatterlayer .trace"),
    ).toHaveCount(2);
  }
  await shootCard(
    page,
    page.locator(".mantine-Card-root", { has: page.getByTestId("mesh-independence-toggle") }),
    "mesh-independence.png",
  );

  // the finest level started from a coarser one's converged fields, mapped onto its mesh
  await page.goto(studyUrl);
  const finest = page.getByTestId("run-row-2");
  await expect(finest).toContainText("0.675");
  await finest.getByRole("link").first().click();
  await expect(page.getByRole("heading", { name: "Run 2" })).toBeVisible();
  await expect(page.getByTestId("resumed-from")).toContainText(
    /Started from the converged fields of run [01] at time \S+ \(another mesh, mapped by mapFields\) — by the portal/,
  );
});
