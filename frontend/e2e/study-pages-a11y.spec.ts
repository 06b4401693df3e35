/**
 * Accessible and comfortable, in Debian's Chromium against the real stack: a study is
 * created with the keyboard alone (Tab, typing, Enter: no mouse), its run ends on OpenFOAM,
 * then axe-core checks every page (signed out and in, light and dark) and finds no serious or
 * critical violation. In the dark theme (the system's prefers-color-scheme) the study and
 * run pages are photographed for the docs.
 */
import AxeBuilder from "@axe-core/playwright";
import { expect, test, type BrowserContext, type Locator, type Page } from "@playwright/test";
import path from "node:path";

const USER = process.env.E2E_USER ?? "alice";
const PASSWORD = process.env.E2E_PASSWORD ?? "alice-password";
const SHOTS = process.env.SCREENSHOT_DIR;
const STUDY = `E2E keyboard cavity ${Date.now().toString(36)}`;

/** Press Tab until `target` has the focus (the way a keyboard user gets there). */
async function tabTo(page: Page, target: Locator, max = 120) {
  const handle = await target.elementHandle();
  for (let i = 0; i < max; i++) {
    const focused = await page.evaluate((el) => document.activeElement === el, handle);
    if (focused) return;
    await page.keyboard.press("Tab");
  }
  throw new Error(`Tab never reached ${target.toString()}`);
}

/** axe-core over the page as it is now: no serious or critical violation. */
async function expectAccessible(page: Page, what: string) {
  const results = await new AxeBuilder({ page })
    .withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"])
    .analyze();
  const bad = results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map(
      (v) =>
        `${v.id} (${v.impact}): ${v.help} at ` +
        v.nodes.map((n) => `${n.target.join(" ")} [${n.any[0]?.message ?? ""}]`).join(" | "),
    );
  expect.soft(bad, `${what}: serious or critical accessibility violations`).toEqual([]);
}

async function shot(page: Page, name: string) {
  if (!SHOTS) return;
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.mouse.move(0, 0);
  await page.waitForTimeout(600);
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

test.describe.serial("accessible with the keyboard, a screen reader and in the dark", () => {
  let context: BrowserContext;
  let page: Page;
  let studyUrl = "";
  let runUrl = "";

  test.beforeAll(async ({ browser }) => {
    context = await browser.newContext(); // axe-core opens frames of its own in it
    page = await context.newPage();
  });
  test.afterAll(async () => {
    await context.close();
  });

  test("the sign-in page, then sign in with the keyboard", async () => {
    await page.goto("/login");
    await expectAccessible(page, "sign-in");
    await tabTo(page, page.getByLabel("Username"));
    await page.keyboard.type(USER);
    await page.keyboard.press("Tab");
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press("Enter");
    await expect(page.getByTestId("account-menu")).toContainText(USER);
  });

  test("a study is created with the keyboard alone", async () => {
    await page.goto("/studies/new");
    await expect(page.getByTestId("template-cavity")).toBeVisible();
    await expectAccessible(page, "new study (empty)");
    await tabTo(page, page.getByTestId("template-cavity"));
    await page.keyboard.press("Enter");
    await expect(page.getByTestId("template-cavity")).toHaveAttribute("aria-checked", "true");
    await tabTo(page, page.getByTestId("study-name"));
    await page.keyboard.type(STUDY);
    await expect(page.getByTestId("run-count")).toHaveText(/^\d+$/);
    // through the steps (parameters, run configuration, objectives) to the review
    for (let step = 1; step <= 4; step++) {
      await tabTo(page, page.getByTestId("next-step"));
      await page.keyboard.press("Enter");
      await expect(page.getByTestId(`step-${step}`)).toHaveAttribute("data-progress", "true");
      await expectAccessible(page, `new study, step ${step}`);
      if (step === 4) break;
    }
    await expect(page.getByTestId("spec-yaml")).toContainText("template: cavity");
    await tabTo(page, page.getByTestId("submit-study"));
    await page.keyboard.press("Enter");
    await expect(page).toHaveURL(/\/studies\/[0-9a-f-]{36}$/);
    studyUrl = new URL(page.url()).pathname;
    await expect(page.getByRole("heading", { name: STUDY })).toBeVisible();
  });

  test("the study and run pages, once the run ended", async () => {
    await expect(page.getByTestId("run-row-0")).toHaveAttribute("data-state", "completed", {
      timeout: 120_000,
    });
    await expect(page.getByTestId("run-row-0")).not.toContainText("—");
    await expectAccessible(page, "study");
    await page.getByTestId("run-row-0").getByRole("link").click();
    await expect(page.getByRole("heading", { name: "Run 0" })).toBeVisible();
    runUrl = new URL(page.url()).pathname;
    await expect(page.getByTestId("log-tail")).toContainText("End");
    await expect(page.getByTestId("run-peak-memory")).toContainText("MB");
    await expectAccessible(page, "run");
  });

  test("every other page", async () => {
    const pages: [string, Locator][] = [
      ["/", page.getByTestId("quota-cores")],
      ["/studies", page.getByTestId("study-row").first()],
      ["/runs", page.getByTestId("runs-table")],
      ["/settings/tokens", page.getByRole("heading", { level: 2 }).first()],
      ["/settings/notifications", page.getByRole("heading", { level: 2 }).first()],
      ["/operations/tenants", page.getByTestId("admin-tenants")],
      ["/operations/backends", page.getByRole("tab", { name: "Backends", selected: true })],
      [
        "/operations/images",
        page.getByRole("tab", { name: "Packages and images", selected: true }),
      ],
      ["/no/such/page", page.getByTestId("not-found")],
    ];
    for (const [url, ready] of pages) {
      await page.goto(url);
      await expect(ready).toBeVisible();
      await expectAccessible(page, url);
    }
  });

  test("in the dark, as the system asks", async () => {
    await page.emulateMedia({ colorScheme: "dark" });
    await page.goto(studyUrl);
    await expect(page.locator("html")).toHaveAttribute("data-mantine-color-scheme", "dark");
    await expect(page.getByTestId("run-row-0")).toBeVisible();
    await expectAccessible(page, "study, dark");
    await shot(page, "study-dark");
    await page.goto(runUrl);
    await expect(page.getByTestId("residual-plot")).toHaveAttribute("data-theme", "dark");
    await expect(page.getByTestId("log-tail")).toContainText("End");
    await expectAccessible(page, "run, dark");
    await shot(page, "run-dark");
    await page.emulateMedia({ colorScheme: "light" });
  });
});
