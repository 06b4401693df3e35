/**
 * The results views on the real stack (PostgreSQL, Redis, Celery, the run agent and
 * OpenFOAM): three airfoil runs complete, their agents post-process them in the sandbox;
 * the run page shows the final fields and Cp, the study page a drag polar and the selected
 * runs' fields on one colour scale, and the compare view puts them side by side. Another
 * tenant gets 404 for a run's fields.
 */
import { expect, test, type Locator, type Page } from "@playwright/test";
import path from "node:path";

const USER = process.env.E2E_USER ?? "alice";
const PASSWORD = process.env.E2E_PASSWORD ?? "alice-password";
const OTHER_USER = process.env.E2E_OTHER_USER ?? "bob";
const OTHER_PASSWORD = process.env.E2E_OTHER_PASSWORD ?? "bob-password";
const SHOTS = process.env.SCREENSHOT_DIR;
const STUDY = `E2E fields ${Date.now().toString(36)}`;

async function signIn(page: Page, user: string, password: string) {
  await page.goto("/login");
  await page.getByLabel("Username").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("account-menu")).toContainText(user);
}

async function points(plot: Locator): Promise<number> {
  return Number((await plot.getAttribute("data-points")) ?? "0");
}

/** A picture of one part of the page (the new views sit below the fold). */
async function shot(page: Page, part: Locator, name: string) {
  if (!SHOTS) return;
  await part.scrollIntoViewIfNeeded();
  await page.mouse.move(0, 0); // no hover state (plot toolbars) in the pictures
  await page.waitForTimeout(600); // let plots finish their transition
  await part.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

test.describe.serial("flow fields, polars and the compare view", () => {
  let page: Page;
  let studyUrl = "";
  let runIds: string[] = [];

  test.beforeAll(async ({ browser }) => {
    page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
  });
  test.afterAll(async () => {
    await page.close();
  });

  test("three airfoil runs complete", async () => {
    await signIn(page, USER, PASSWORD);
    const csrf = (await page.context().cookies()).find((c) => c.name === "csrftoken")?.value;
    const created = await page.request.post("/api/v1/studies/", {
      headers: { "X-CSRFToken": csrf ?? "" },
      data: {
        name: STUDY,
        template: "airfoil2d",
        parameters: { aoa: { values: [0, 4, 8] }, iterations: { value: 120 } },
        fields: ["nut"],
      },
    });
    expect(created.status(), await created.text()).toBe(201);
    const study = (await created.json()) as { id: string };
    studyUrl = `/studies/${study.id}`;
    await page.goto(studyUrl);
    await expect(page.getByTestId("count-completed")).toHaveText("Completed 3", {
      timeout: 110_000,
    });
    const runs = await page.request.get(`/api/v1/studies/${study.id}/runs/`);
    runIds = ((await runs.json()) as { results: { id: string; index: number }[] }).results
      .sort((a, b) => a.index - b.index)
      .map((r) => r.id);
    expect(runIds).toHaveLength(3);
  });

  test("a completed run shows its final fields and Cp", async () => {
    await page.goto(`/runs/${runIds[2]}`);
    const fields = page.getByTestId("flow-fields");
    await expect(fields).toBeVisible();
    await expect.poll(() => points(page.getByTestId("field-plot"))).toBeGreaterThan(10);
    await expect.poll(() => points(page.getByTestId("cp-plot"))).toBeGreaterThan(10);
    await expect(page.getByTestId("cp-reference")).toContainText("magUInf");
    // the spec's extra field is there to choose
    await page.getByTestId("field-select").click();
    await expect(page.getByRole("option", { name: "nut" })).toBeVisible();
    await page.getByRole("option", { name: "p", exact: true }).click();
    await expect(page.getByRole("figure", { name: /^p on the body region/ })).toBeVisible();
    await shot(page, fields, "run-fields");
  });

  test("the study page plots Cl against Cd and the selected runs' fields together", async () => {
    await page.goto(studyUrl);
    await expect.poll(() => points(page.getByTestId("polar-plot"))).toBe(3);
    await expect(page.getByTestId("polar-count")).toHaveText("3 of 3 completed runs have both");
    for (const index of [0, 1, 2]) {
      const box = page.getByRole("checkbox", { name: `Select run ${index}` });
      await box.click();
      await expect(box).toBeChecked();
    }
    await expect(page.getByTestId("field-compare-plot")).toHaveCount(3);
    await expect(page.getByTestId("field-compare-range")).toContainText("one colour scale");
    await shot(page, page.getByTestId("study-results"), "study-polar-fields");
  });

  test("the compare view puts the runs side by side", async () => {
    await page.getByTestId("compare-selected").click();
    await expect(page).toHaveURL(/\/compare\?runs=/);
    await expect(page.getByTestId("compare-table")).toContainText("aoa");
    await expect(page.getByTestId("field-compare-plot")).toHaveCount(3);
    await expect.poll(() => points(page.getByTestId("residual-overlay"))).toBeGreaterThan(10);
    await shot(page, page.locator("main"), "compare");
  });

  test("another tenant cannot read a run's fields", async ({ browser }) => {
    const context = await browser.newContext();
    const other = await context.newPage();
    await signIn(other, OTHER_USER, OTHER_PASSWORD);
    const index = await other.request.get(`/api/v1/runs/${runIds[0]}/fields/`);
    expect(index.status()).toBe(404);
    const data = await other.request.get(`/api/v1/runs/${runIds[0]}/fields/data/?field=p`);
    expect(data.status()).toBe(404);
    await context.close();
  });
});
