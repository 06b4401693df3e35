/**
 * A run that did not complete has no results, on the real stack (PostgreSQL, Redis, Celery,
 * the run agent and icoFoam): a cavity run stopped mid-solve from its page shows "—" for
 * every objective in the runs table and on its page, what its partial series gave only in
 * a block labelled partial, and its results.csv row has no objective value.
 */
import { expect, test, type Page } from "@playwright/test";

const USER = process.env.E2E_USER ?? "alice";
const PASSWORD = process.env.E2E_PASSWORD ?? "alice-password";
const STUDY = `E2E stopped cavity ${Date.now().toString(36)}`;
const OBJECTIVES = ["u_min", "v_min", "mean_speed"]; // the cavity template's

async function signIn(page: Page, user: string, password: string) {
  await page.goto("/login");
  await page.getByLabel("Username").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("account-menu")).toContainText(user);
}

/** A CSV line's cells (the cavity's values hold no comma or quote). */
const cells = (line: string) => line.split(",");

test("a run stopped mid-solve shows no objective anywhere, only labelled partial values", async ({
  page,
}) => {
  test.setTimeout(240_000);
  await signIn(page, USER, PASSWORD);
  const csrf = (await page.context().cookies()).find((c) => c.name === "csrftoken")?.value;
  // 50 s of simulated time on 400 cells: thousands of steps, still solving when stopped
  const created = await page.request.post("/api/v1/studies/", {
    headers: { "X-CSRFToken": csrf ?? "" },
    data: { name: STUDY, template: "cavity", parameters: { cells: 20, end_time: 50 } },
  });
  expect(created.status(), await created.text()).toBe(201);
  const study = (await created.json()) as { id: string };
  const runs = await page.request.get(`/api/v1/studies/${study.id}/runs/`);
  const runId = ((await runs.json()) as { results: { id: string }[] }).results[0]!.id;

  // solving, with every objective's series on its way
  await expect
    .poll(
      async () => {
        const t = await page.request.get(`/api/v1/runs/${runId}/telemetry/`);
        return ((await t.json()) as { available?: string[] }).available ?? [];
      },
      { timeout: 150_000, message: "the run's objective series" },
    )
    .toEqual(expect.arrayContaining(["returnFlow.min(Ux)", "meanSpeed.volAverage(mag(U))"]));

  await page.goto(`/runs/${runId}`);
  await page.getByTestId("stop-run").click();
  await page.getByTestId("confirm-stop").click();
  // its agent's last report brings what the partial series give: shown apart, labelled
  const partial = page.getByTestId("partial-objectives");
  await expect(partial).toBeVisible({ timeout: 60_000 });
  await expect(partial).toContainText("Partial (run did not complete)");
  await expect(page.getByTestId("partial-mean_speed")).toHaveText(/\d/);
  for (const name of OBJECTIVES)
    await expect(page.getByTestId(`objective-${name}`)).toHaveText("—");

  // the runs table: "—" under every objective
  await page.goto(`/studies/${study.id}`);
  const row = page.getByTestId("run-row-0");
  await expect(row).toHaveAttribute("data-state", "cancelled");
  const headers = await page.getByTestId("runs-table").getByRole("columnheader").allTextContents();
  const rowCells = row.getByRole("cell");
  for (const name of OBJECTIVES) {
    const at = headers.indexOf(name);
    expect(at, `a column for ${name} in ${headers.join(" | ")}`).toBeGreaterThanOrEqual(0);
    await expect(rowCells.nth(at)).toHaveText("—");
  }

  // results.csv: no objective value in its row; the partial ones in their own columns
  const csv = await page.request.get(`/api/v1/studies/${study.id}/results.csv`);
  expect(csv.status()).toBe(200);
  const [head, line] = (await csv.text()).trim().split(/\r?\n/);
  const columns = cells(head!);
  const values = cells(line!);
  expect(values[columns.indexOf("state")]).toBe("cancelled");
  for (const name of OBJECTIVES) {
    expect(columns).toContain(name);
    expect(values[columns.indexOf(name)], name).toBe("");
  }
  expect(Number(values[columns.indexOf("partial.mean_speed")])).toBeGreaterThan(0);
});
