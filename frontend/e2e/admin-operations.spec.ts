/**
 * The operations page against the real stack: another tenant's member queues a study; an
 * operator finds its runs among every tenant's, narrows them by tenant, backend and state,
 * and stops a queued one with a reason; the run's owner reads that reason on the run's page,
 * and cannot open the operators' list of runs themselves.
 */
import path from "node:path";
import { expect, test, type Page } from "@playwright/test";

const USER = process.env.E2E_USER ?? "alice";
const PASSWORD = process.env.E2E_PASSWORD ?? "alice-password";
const OTHER_USER = process.env.E2E_OTHER_USER ?? "bob";
const OTHER_PASSWORD = process.env.E2E_OTHER_PASSWORD ?? "bob-password";
const OTHER_TENANT = "other-e2e";
const SHOTS = process.env.SCREENSHOT_DIR;
const STUDY = `E2E operations ${Date.now().toString(36)}`;
const REASON = "the cluster's file system is being repaired tonight";

async function signIn(page: Page, user: string, password: string) {
  await page.goto("/login");
  await page.getByLabel("Username").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  // a machine shared with other work may take a while to answer the first sign-in
  await expect(page.getByTestId("account-menu")).toContainText(user, { timeout: 60_000 });
}

async function csrf(page: Page): Promise<string> {
  return (await page.context().cookies()).find((c) => c.name === "csrftoken")?.value ?? "";
}

test.setTimeout(300_000);

test("an operator filters every tenant's runs and stops one with a reason its owner reads", async ({
  browser,
}) => {
  // the other tenant (one run at a time) queues a study of five runs
  const owner = await browser.newPage();
  await signIn(owner, OTHER_USER, OTHER_PASSWORD);
  const created = await owner.request.post("/api/v1/studies/", {
    headers: { "X-CSRFToken": await csrf(owner) },
    data: {
      name: STUDY,
      template: "cavity",
      parameters: {
        lid_velocity: { values: [1, 2, 3, 4, 5] },
        cells: { value: 10 },
        end_time: { value: 10 },
      },
    },
  });
  expect(created.status(), await created.text()).toBe(201);
  const studyId = ((await created.json()) as { id: string }).id;

  // a member of a tenant is refused the operators' list
  const refused = await owner.request.get("/api/v1/admin/runs/");
  expect(refused.status()).toBe(403);

  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  await signIn(page, USER, PASSWORD);
  await page.goto("/operations/runs");
  const table = page.getByTestId("operations-runs");
  await expect(table).toBeVisible();

  await page.getByRole("textbox", { name: "Tenant" }).click();
  await page.getByRole("option", { name: OTHER_TENANT }).click();
  await page.getByRole("textbox", { name: "Backend" }).click();
  await page.getByRole("option", { name: "local", exact: true }).click();
  await page.getByRole("textbox", { name: "State" }).click();
  await page.getByRole("option", { name: "Queued" }).click();
  await page.keyboard.press("Escape");

  const rows = table.getByTestId("operations-run").filter({ hasText: STUDY });
  await expect(rows.first()).toBeVisible();
  // only the other tenant's queued runs are left
  for (const row of await table.getByTestId("operations-run").all()) {
    await expect(row).toContainText(OTHER_TENANT);
    await expect(row).toContainText("queued");
  }
  const before = await rows.count();
  expect(before).toBeGreaterThanOrEqual(1);
  const victim = rows.last();
  const label = (await victim
    .getByRole("button", { name: /^Stop run/ })
    .getAttribute("aria-label"))!;
  const index = /Stop run (\d+) of/.exec(label)![1];
  if (SHOTS) await page.screenshot({ path: path.join(SHOTS, "admin-operations.png") });

  await victim.getByRole("button", { name: /^Stop run/ }).click();
  const dialog = page.getByRole("dialog", { name: `Stop run ${index} of ${STUDY}` });
  await dialog.getByRole("textbox", { name: "Reason" }).fill(REASON);
  await dialog.getByRole("button", { name: "Stop run" }).click();
  await expect(dialog).toBeHidden();
  // the stopped run leaves the list (others may leave it too, admitted meanwhile as the
  // tenant's running run ends)
  await expect(table.getByRole("button", { name: label, exact: true })).toHaveCount(0);

  // the owner reads why on the run's page
  const runs = await owner.request.get(`/api/v1/studies/${studyId}/runs/`);
  const run = ((await runs.json()) as { results: { id: string; index: number }[] }).results.find(
    (r) => String(r.index) === index,
  )!;
  await owner.goto(`/runs/${run.id}`);
  const alert = owner.getByRole("alert").filter({ hasText: "Stopped by an administrator" });
  await expect(alert).toBeVisible();
  await expect(alert).toContainText(`stopped by an administrator (${USER}): ${REASON}`);

  // nothing of the study keeps running after the test
  await owner.request.post(`/api/v1/studies/${studyId}/cancel/`, {
    headers: { "X-CSRFToken": await csrf(owner) },
  });
  await owner.close();
  await page.close();
});
