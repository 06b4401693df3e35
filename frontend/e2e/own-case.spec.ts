/**
 * A new user's own case in Debian's Chromium against the real stack: pitzDaily with a
 * placeholder for the inlet velocity and an areaAverage of p on the inlet named inletP
 * (e2e/fixtures/pitzdaily-inletp.tar.gz, 30 iterations). The wizard shows what it read from
 * the case (simpleFoam, the placeholder, the series), offers that series for an objective,
 * and the study's plot fills with it; an objective added afterwards is recomputed from the
 * stored series.
 */
import { expect, test } from "@playwright/test";
import path from "node:path";
import { signIn } from "./support";

const STUDY = `E2E own case ${Date.now().toString(36)}`;
const ARCHIVE = path.join(import.meta.dirname, "fixtures", "pitzdaily-inletp.tar.gz");

test("an uploaded case's own function object becomes the study's objective", async ({ page }) => {
  test.setTimeout(240_000);
  await signIn(page);
  await page.goto("/studies/new");
  await page.getByTestId("study-name").fill(STUDY);
  await page.getByText("Upload my case").click();
  await page.locator('input[type="file"]').setInputFiles(ARCHIVE);

  const inspection = page.getByTestId("case-inspection");
  await expect(inspection).toBeVisible({ timeout: 30_000 });
  await expect(page.getByTestId("inspected-solver")).toHaveText("simpleFoam");
  await expect(page.getByTestId("inspected-series")).toContainText("inletP.areaAverage(p)");
  await expect(page.getByRole("table", { name: "Placeholders" })).toContainText("Uin");

  await page.getByTestId("next-step").click(); // parameters
  await page.getByTestId("param-Uin-values").fill("5, 10");
  await expect(page.getByTestId("run-count")).toHaveText("2");
  await page.getByTestId("next-step").click(); // run configuration: the solver is preselected
  await expect(page.getByTestId("run-steps")).toContainText("simpleFoam");
  await page.getByTestId("next-step").click(); // objectives
  await page.getByRole("button", { name: "Add objective" }).click();
  await page.getByLabel("Objective name").last().fill("p_in");
  const series = page.locator('input[aria-label="p_in series"]');
  await series.click();
  await page.getByRole("option", { name: "inletP.areaAverage(p)" }).click();
  await expect(series).toHaveValue("inletP.areaAverage(p)");
  await page.getByTestId("next-step").click(); // review
  await expect(page.getByTestId("spec-yaml")).toContainText("inletP.areaAverage(p)");
  await page.getByTestId("submit-study").click();

  await expect(page).toHaveURL(/\/studies\/[0-9a-f-]{36}$/);
  const studyId = new URL(page.url()).pathname.split("/").pop()!;
  await expect(page.getByTestId("objective-count")).toHaveText("2 of 2 runs have p_in", {
    timeout: 180_000,
  });
  await expect
    .poll(async () =>
      Number((await page.getByTestId("objective-plot").getAttribute("data-points")) ?? "0"),
    )
    .toBe(2);

  // an objective added after the runs: recomputed from the stored series, nothing reruns
  await page.getByTestId("edit-objectives").click();
  const dialog = page.getByRole("dialog", { name: "Edit objectives" });
  await dialog.getByRole("button", { name: "Add objective" }).click();
  await dialog.getByLabel("Objective name").last().fill("p_peak");
  const peak = dialog.locator('input[aria-label="p_peak series"]');
  await peak.click();
  await page.getByRole("option", { name: "inletP.areaAverage(p)" }).click();
  await dialog.getByLabel("p_peak reduction").click();
  await page.getByRole("option", { name: "maximum" }).click();
  await page.getByTestId("save-objectives").click();
  await expect(dialog).toBeHidden();
  const results = await (await page.request.get(`/api/v1/studies/${studyId}/results/`)).json();
  for (const row of results.rows) {
    expect(row.objectives.p_peak).toBeGreaterThanOrEqual(row.objectives.p_in);
  }
});
