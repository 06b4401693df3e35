/**
 * From submission to results, in Debian's Chromium against the real stack (PostgreSQL,
 * Redis, Celery, the run agent and OpenFOAM): sign in, create an airfoil study with five
 * angles of attack, cancel a queued run, watch residuals arrive, see the Cl plot fill,
 * download the CSV, filter the table and the plot together; then a user of another tenant sees none of it.
 *
 * The test tenant's quota allows one run at a time, so runs 1 to 4 queue behind run 0.
 * Runs 0 to 3 go up to 300 iterations (they converge at about 250, a few seconds each), run
 * 4 uses 60. Right after submission the test cancels run 4, last in the queue, then watches
 * run 3 from before it starts until its points arrive: three runs of a few seconds each
 * stand between the submission and run 3's start, whatever this machine's speed.
 */
import { expect, test, type Locator, type Page } from "@playwright/test";
import { readFile } from "node:fs/promises";
import path from "node:path";

const USER = process.env.E2E_USER ?? "alice";
const PASSWORD = process.env.E2E_PASSWORD ?? "alice-password";
const OTHER_USER = process.env.E2E_OTHER_USER ?? "bob";
const OTHER_PASSWORD = process.env.E2E_OTHER_PASSWORD ?? "bob-password";
const SHOTS = process.env.SCREENSHOT_DIR;
const STUDY = `E2E airfoil polar ${Date.now().toString(36)}`;

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

async function shot(page: Page, name: string) {
  if (!SHOTS) return;
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.mouse.move(0, 0); // no hover state (plot toolbars) in the pictures
  await page.waitForTimeout(600); // let plots finish their transition
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

test.describe.serial("a study from submission to results", () => {
  let page: Page;
  let studyUrl = "";
  let studyId = "";

  test.beforeAll(async ({ browser }) => {
    page = await browser.newPage();
  });
  test.afterAll(async () => {
    await page.close();
  });

  test("sign-in says clearly what went wrong, then signs in", async () => {
    await page.goto("/studies");
    await expect(page).toHaveURL(/\/login\?next=%2Fstudies/);
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page.getByText("Enter your username")).toBeVisible();
    await page.getByLabel("Username").fill(USER);
    await page.getByLabel("Password").fill("not-the-password");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page.getByRole("alert")).toContainText("Wrong username or password");
    await shot(page, "sign-in");
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page).toHaveURL(/\/studies$/); // back where the user wanted to go
    await expect(page.getByTestId("tenant-name")).toBeVisible();
  });

  test("create a study from the airfoil template with five angles", async () => {
    await page.goto("/");
    await page.getByTestId("template-airfoil2d").click();
    await expect(page).toHaveURL(/\/studies\/new\?template=airfoil2d/);
    await page.getByTestId("study-name").fill(STUDY);
    await page.getByTestId("next-step").click();

    // five angles, zipped with iterations: the first four runs are longer (they converge at
    // about 250), so run 4 still waits to be cancelled and run 3 to be watched
    await page.getByTestId("param-aoa-values").fill("0, 4, 8, 12, 16");
    await page.locator("label", { hasText: /^Zip$/ }).click();
    await page.getByTestId("param-iterations-mode").click();
    await page.getByRole("option", { name: "List" }).click();
    await page.getByTestId("param-iterations-values").fill("300, 300, 300, 300, 60");
    await expect(page.getByTestId("run-count")).toHaveText("5");
    await expect(page.getByTestId("quota-impact")).toContainText("5 runs × 1 core");
    await expect(page.getByTestId("preview-rows")).toContainText("8");

    // live validation: a value outside the template's bounds is named on its input
    await page.getByTestId("param-aoa-values").fill("0, 4, 8, 12, 80");
    await expect(page.getByText(/above its maximum/).first()).toBeVisible();
    await page.getByTestId("param-aoa-values").fill("0, 4, 8, 12, 16");
    await expect(page.getByTestId("run-count")).toHaveText("5");
    await shot(page, "new-study-parameters");

    await page.getByTestId("next-step").click(); // run configuration
    await expect(page.getByTestId("run-steps")).toContainText("simpleFoam");
    await page.getByTestId("next-step").click(); // objectives
    await expect(page.getByTestId("convergence-form")).toBeVisible();
    await page.getByTestId("next-step").click(); // review
    await expect(page.getByTestId("spec-yaml")).toContainText("template: airfoil2d");
    await expect(page.getByTestId("spec-yaml")).toContainText("combine: zip");
    await page.getByTestId("submit-study").click();

    await expect(page).toHaveURL(/\/studies\/[0-9a-f-]{36}$/);
    studyUrl = new URL(page.url()).pathname;
    studyId = studyUrl.split("/").pop()!;
    await expect(page.getByRole("heading", { name: STUDY })).toBeVisible();
    await expect(page.getByTestId("runs-table")).toBeVisible();
    await expect(page.getByTestId("run-row-4")).toBeVisible();
  });

  test("cancel a queued run: it says why it waits, then stops", async () => {
    // right after submission: run 0 runs, runs 1 to 4 wait their turn
    await page.getByTestId("run-row-4").getByRole("link").click();
    await expect(page.getByRole("heading", { name: "Run 4" })).toBeVisible();
    await expect(page.getByTestId("wait-reason")).toContainText("Queued");
    await shot(page, "run-queued");
    await page.getByTestId("stop-run").click();
    await page.getByTestId("confirm-stop").click();
    await expect(page.locator('[data-state="cancelled"]').first()).toBeVisible();
    await expect(page.getByTestId("stop-run")).toHaveCount(0);
  });

  test("the residual plot receives points while the run runs", async () => {
    // run 3 starts after runs 0 to 2 (a few seconds of simpleFoam each): the page is open
    // before its first point
    await page.goto(studyUrl);
    await page.getByTestId("run-row-3").getByRole("link").click();
    await expect(page.getByRole("heading", { name: "Run 3" })).toBeVisible();
    const plot = page.getByTestId("residual-plot");
    const first = await points(plot);
    // the page follows the run (websocket, polling as a fallback): points arrive without a reload
    await expect.poll(() => points(plot), { timeout: 60_000 }).toBeGreaterThan(first);
  });

  test("a finished run shows its objectives, log, resource figures and how to rerun it", async () => {
    await page.goto(studyUrl);
    await page.getByTestId("run-row-1").getByRole("link").click();
    await expect(page.locator('[data-state="completed"]').first()).toBeVisible({ timeout: 90_000 });
    await expect(page.getByTestId("objective-Cl")).toBeVisible();
    await expect(page.getByTestId("log-tail")).toContainText("End");
    // its own figures (the solver's peak, not the last sample), and the commands it ran
    await expect(page.getByTestId("run-peak-memory")).toContainText("MB");
    await expect(page.getByTestId("run-core-hours")).toContainText("core-h");
    await expect(page.getByTestId("rerun-script")).toContainText(
      "simpleFoam > log.simpleFoam 2>&1",
    );
    await shot(page, "run");
  });

  test("the Cl plot fills in and the CSV holds every run", async () => {
    await page.goto(studyUrl);
    await expect(page.getByTestId("objective-count")).toHaveText("4 of 5 runs have Cl", {
      timeout: 90_000,
    });
    await expect.poll(() => points(page.getByTestId("objective-plot"))).toBe(4);
    await expect(page.getByTestId("count-completed")).toHaveText("Completed 4");
    await expect(page.getByTestId("count-cancelled")).toHaveText("Cancelled 1");
    // compare the residuals of the two completed runs
    // (the selection lives in the URL; react-router applies it in a transition)
    for (const index of [0, 1]) {
      const box = page.getByRole("checkbox", { name: `Select run ${index}` });
      await box.click();
      await expect(box).toBeChecked();
    }
    await expect.poll(() => points(page.getByTestId("residual-overlay"))).toBeGreaterThan(10);
    await expect(page).toHaveURL(/runs=/); // the selection is part of the shareable URL
    await shot(page, "study");

    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByTestId("download-csv").click(),
    ]);
    const csv = await readFile((await download.path())!, "utf-8");
    const [header, ...rows] = csv
      .trim()
      .split(/\r?\n/)
      .map((l) => l.split(","));
    expect(header).toEqual(
      expect.arrayContaining(["run", "index", "aoa", "state", "Cl", "Cd", "LD"]),
    );
    expect(rows).toHaveLength(5);
    const col = (name: string) => header!.indexOf(name);
    expect(rows.map((r) => r[col("aoa")])).toEqual(["0", "4", "8", "12", "16"]);
    expect(rows.map((r) => r[col("state")])).toEqual([
      "completed",
      "completed",
      "completed",
      "completed",
      "cancelled",
    ]);
    for (const r of rows.slice(0, 4)) expect(Number(r[col("Cl")])).not.toBeNaN();
    expect(Number(rows[1]![col("Cl")])).toBeGreaterThan(Number(rows[0]![col("Cl")])); // lift grows with aoa
  });

  test("the Cl plot follows the runs table's filter", async () => {
    // a range on aoa (the table's filter lives in the URL): the table and the plot both
    // show the runs at 4 and 8 degrees, and the plot says which runs it shows
    await page.goto(`${studyUrl}?range=param.aoa:4..8`);
    await expect(page.locator('[data-testid^="run-row-"]')).toHaveCount(2);
    await expect(page.getByTestId("run-row-1")).toBeVisible();
    await expect(page.getByTestId("run-row-2")).toBeVisible();
    await expect.poll(() => points(page.getByTestId("objective-plot"))).toBe(2);
    await expect(page.getByTestId("plot-filter")).toContainText("aoa 4 to 8");
    // and a state the plotted runs do not have empties both
    await page.goto(`${studyUrl}?range=param.aoa:4..8&state=cancelled`);
    await expect(page.locator('[data-testid^="run-row-"]')).toHaveCount(0);
    await expect.poll(() => points(page.getByTestId("objective-plot"))).toBe(0);
    await expect(page.getByTestId("plot-filter")).toContainText("state cancelled · aoa 4 to 8");
  });

  test("the main pages, for the docs", async () => {
    await page.goto("/");
    await expect(page.getByTestId("quota-cores")).toBeVisible();
    await expect(page.getByTestId("study-row").first()).toBeVisible();
    await shot(page, "dashboard");
    await page.goto("/studies");
    await expect(page.getByTestId("study-row").first()).toContainText(STUDY);
    await shot(page, "studies");
    await page.goto("/operations/tenants");
    await expect(page.getByTestId("admin-tenants")).toBeVisible();
    await shot(page, "admin");
  });

  test("a user of another tenant sees none of it", async ({ browser }) => {
    const context = await browser.newContext();
    const other = await context.newPage();
    await signIn(other, OTHER_USER, OTHER_PASSWORD);
    await other.goto("/studies");
    // their own list (it may hold studies of their own) has loaded, without this one
    await expect(
      other.getByTestId("study-row").or(other.getByText("No studies yet")).first(),
    ).toBeVisible();
    await expect(other.getByText(STUDY)).toHaveCount(0);
    await other.goto(studyUrl);
    await expect(other.getByTestId("not-found")).toBeVisible();
    const api = await other.request.get(`/api/v1/studies/${studyId}/`);
    expect(api.status()).toBe(404);
    const csv = await other.request.get(`/api/v1/studies/${studyId}/results.csv`);
    expect(csv.status()).toBe(404);
    await other.goto("/operations");
    await expect(other.getByText("Operators only")).toBeVisible();
    await context.close();
  });
});
