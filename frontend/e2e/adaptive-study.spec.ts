/**
 * An adaptive study made in the wizard, in Debian's Chromium against the real stack
 * (PostgreSQL, Redis, Celery, the run agent and OpenFOAM): the lid-driven cavity with its lid
 * speed sampled between bounds, an initial design of 2 runs and a budget of 3, one run a
 * batch. The study runs its batches and its surrogate map draws the one parameter as a line
 * with a ± 2 std band, naming the objective.
 */
import { expect, test, type Page } from "@playwright/test";
import path from "node:path";

const USER = process.env.E2E_USER ?? "alice";
const PASSWORD = process.env.E2E_PASSWORD ?? "alice-password";
const SHOTS = process.env.SCREENSHOT_DIR;
const STUDY = `E2E adaptive cavity ${Date.now().toString(36)}`;

async function shot(page: Page, name: string) {
  if (!SHOTS) return;
  await page.mouse.move(0, 0); // no hover state (plot toolbars) in the pictures
  await page.waitForTimeout(600); // let plots finish their transition
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: false });
}

test("an adaptive study made in the wizard runs its batches and maps its objective", async ({
  page,
}) => {
  test.setTimeout(360_000);
  await page.goto("/login");
  await page.getByLabel("Username").fill(USER);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("account-menu")).toContainText(USER);

  await page.goto("/");
  await page.getByTestId("template-cavity").click();
  await page.getByTestId("study-name").fill(STUDY);
  await page.getByTestId("next-step").click();

  await page.locator("label", { hasText: "Adaptive (Gaussian-process surrogate)" }).click();
  await expect(page.getByTestId("adaptive-fields")).toBeVisible();
  // the demo's list of cell counts became bounds; hold the mesh coarse and sample the lid
  await expect(page.getByTestId("param-cells-min")).toHaveValue("10");
  await page.getByTestId("param-cells-mode").click();
  await page.getByRole("option", { name: "Fixed" }).click();
  await page.getByTestId("param-cells-value").fill("10");
  await page.getByTestId("param-lid_velocity-mode").click();
  await page.getByRole("option", { name: "Sampled" }).click();
  await page.getByTestId("param-lid_velocity-min").fill("0.5");
  await page.getByTestId("param-lid_velocity-max").fill("2");

  // each field says what is wrong with it where it is typed
  await page.getByTestId("adaptive-budget").fill("1");
  await expect(page.getByText(/no room for a surrogate/)).toBeVisible();
  await page.getByTestId("adaptive-budget").fill("3");
  await page.getByTestId("adaptive-batch").fill("1");
  await page.getByTestId("adaptive-initial").fill("2");
  await page.getByTestId("adaptive-objectives").click();
  await page.getByRole("option", { name: "u_min" }).click();
  await page.keyboard.press("Escape");

  await expect(page.getByTestId("run-count")).toHaveText("2");
  await expect(page.getByTestId("preview-adaptive")).toHaveText(
    "Then batches of 1 up to 3 runs in all (≤ 2 batches), mapping u_min.",
  );
  await shot(page, "new-study-adaptive");

  for (let i = 0; i < 3; i++) await page.getByTestId("next-step").click();
  const yaml = page.getByTestId("spec-yaml");
  await expect(yaml).toContainText("combine: adaptive");
  await expect(yaml).toContainText("budget: 3");
  await expect(yaml).toContainText("lid_velocity:");
  await expect(page.getByTestId("submit-study")).toHaveText(/Submit 2 runs of ≤ 3/);
  await page.getByTestId("submit-study").click();

  await expect(page).toHaveURL(/\/studies\/[0-9a-f-]{36}$/);
  await expect(page.getByRole("heading", { name: STUDY })).toBeVisible({ timeout: 90_000 });
  const view = page.getByTestId("surrogate-view");
  await expect(view).toHaveAttribute("data-dimensions", "1", { timeout: 90_000 });
  await expect(page.getByTestId("surrogate-title")).toHaveText(
    "u_min: the surrogate's mean over lid_velocity, with a ± 2 std band",
  );
  await expect(page.getByTestId("surrogate-caption")).toContainText(
    "u_min is the last value of returnFlow.min(Ux) · goal: map u_min",
  );

  // the initial design's 2 runs, then 1 run placed by the surrogate: 3 of 3
  await expect(page.getByTestId("adaptive-progress")).toContainText("3 of 3 runs", {
    timeout: 300_000,
  });
  await expect(page.getByTestId("count-completed")).toHaveText("Completed 3", {
    timeout: 120_000,
  });
  // the line and its band over the bounds, the runs' 3 values on it, the band named
  const map = page.getByTestId("surrogate-map");
  await expect(map.locator(".legendtext", { hasText: "mean ± 2 std" })).toBeVisible();
  await expect(
    map.locator(".legendtext", { hasText: "u_min: the surrogate's mean" }),
  ).toBeVisible();
  await expect(map.locator(".xtitle")).toHaveText("lid_velocity (m/s)");
  await expect(map.locator(".ytitle")).toHaveText("u_min");
  await expect(page.getByTestId("surrogate-note")).toContainText("3 completed runs feed the map");
  await page.getByTestId("surrogate-view").scrollIntoViewIfNeeded();
  await shot(page, "study-adaptive");
});
