/**
 * A study of 100,000 runs, made by scripts/test-frontend for a tenant of its own
 * and cancelled before any worker started: its page, its runs table and the runs page across
 * studies render, count every run, sort on the server and page to the last run.
 */
import { expect, test } from "@playwright/test";
import path from "node:path";

const USER = process.env.E2E_BULK_USER;
const PASSWORD = process.env.E2E_BULK_PASSWORD ?? "";
const STUDY = process.env.E2E_LARGE_STUDY;
const RUNS = Number(process.env.E2E_LARGE_RUNS ?? "100000");
const SHOTS = process.env.SCREENSHOT_DIR;
const fmt = (n: number) => n.toLocaleString("en-GB");

test.describe("a study of 100,000 runs", () => {
  test.skip(!USER || !STUDY, "scripts/test-frontend makes the large study (E2E_LARGE_STUDY)");

  test("its page and runs table render, sort and page", async ({ page }) => {
    await page.goto("/login");
    await page.getByLabel("Username").fill(USER!);
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page.getByTestId("account-menu")).toContainText(USER!);

    await page.goto(`/studies/${STUDY}`);
    await expect(page.getByRole("heading", { name: "Large sweep" })).toBeVisible();
    // every run counted, as cancelled: no "done" that reads as success
    await expect(page.getByTestId("count-cancelled").first()).toContainText(fmt(RUNS));
    const range = page.getByTestId("runs-range");
    await expect(range).toContainText(`of ${fmt(RUNS)} runs`);
    await expect(page.getByTestId("run-row-0")).toBeVisible();
    await expect(page.getByRole("checkbox", { name: `Cancelled ${fmt(RUNS)}` })).toHaveCount(1);

    // the server sorts all of them: descending, the fastest lid (the last run) comes first
    const lid = page.getByRole("columnheader", { name: "lid_velocity" });
    await lid.click();
    await expect(lid).toHaveAttribute("aria-sort", "ascending");
    await lid.click();
    await expect(lid).toHaveAttribute("aria-sort", "descending");
    await expect(page.getByTestId(`run-row-${RUNS - 1}`)).toBeVisible();
    await lid.click();
    await expect(lid).toHaveAttribute("aria-sort", "ascending");
    await expect(page.getByTestId("run-row-0")).toBeVisible();

    // the last page holds the last run
    const last = Math.ceil(RUNS / 100);
    await page.getByRole("button", { name: String(last), exact: true }).click();
    await expect(page).toHaveURL(new RegExp(`[?&]page=${last}\\b`));
    await expect(page.getByTestId(`run-row-${RUNS - 1}`)).toBeVisible();
    await expect(range).toContainText(`${fmt(RUNS)} of ${fmt(RUNS)} runs`);
    if (SHOTS) {
      await page.mouse.move(0, 0);
      await page.screenshot({ path: path.join(SHOTS, "large-study.png") });
    }

    // the runs page across studies counts them too, and pages
    await page.goto("/runs");
    await expect(page.getByTestId("runs-range")).toContainText(`of ${fmt(RUNS)} runs`);
    await expect(page.getByTestId("run-row").first()).toBeVisible();
  });
});
