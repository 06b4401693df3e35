/**
 * A multi-objective adaptive study on the real stack (PostgreSQL, Redis, Celery, the run agent
 * and OpenFOAM): the lid-driven cavity with its lid speed and viscosity sampled, goal pareto
 * over two objectives within a constraint. Its batches run; the study page opens its Pareto
 * front, plots the front apart from the other runs, and shows the hypervolume after each batch,
 * as the API counts them.
 */
import { expect, test, type Locator, type Page } from "@playwright/test";
import { shootCard } from "./support";

const USER = process.env.E2E_USER ?? "alice";
const PASSWORD = process.env.E2E_PASSWORD ?? "alice-password";
const STUDY = `E2E pareto cavity ${Date.now().toString(36)}`;

async function points(plot: Locator): Promise<number> {
  return Number((await plot.getAttribute("data-points")) ?? "0");
}

async function signIn(page: Page) {
  await page.goto("/login");
  await page.getByLabel("Username").fill(USER);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("account-menu")).toContainText(USER);
}

test("a pareto study runs its batches and shows its front and hypervolume", async ({ page }) => {
  test.setTimeout(420_000);
  await signIn(page);
  const csrf = (await page.context().cookies()).find((c) => c.name === "csrftoken")?.value;
  const created = await page.request.post("/api/v1/studies/", {
    headers: { "X-CSRFToken": csrf ?? "" },
    data: {
      name: STUDY,
      template: "cavity",
      combine: "adaptive",
      seed: 2,
      parameters: {
        lid_velocity: { min: 0.5, max: 2 },
        nu: { min: 0.005, max: 0.02 },
        cells: 10,
        end_time: 0.1,
      },
      adaptive: {
        goal: "pareto",
        objectives: ["mean_speed", "u_min"],
        direction: { mean_speed: "max", u_min: "max" },
        constraints: { v_min: { max: 0 } },
        initial: 4,
        batch: 2,
        budget: 6,
      },
    },
  });
  expect(created.status(), await created.text()).toBe(201);
  const study = (await created.json()) as { id: string };

  await page.goto(`/studies/${study.id}`);
  await expect(page.getByRole("heading", { name: STUDY })).toBeVisible();
  // the initial design, then one batch of two placed by the front
  await expect(page.getByTestId("count-completed")).toHaveText("Completed 6", {
    timeout: 360_000,
  });

  const api = await page.request.get(`/api/v1/studies/${study.id}/pareto/`);
  expect(api.status()).toBe(200);
  const front = (await api.json()) as {
    completed: number;
    feasible: number;
    front_size: number;
    history: { batch: number }[];
  };
  expect(front.completed).toBe(6);
  expect(front.history.map((h) => h.batch)).toEqual([1, 2]);

  // a study whose batches grow a front opens its panel by itself
  const summary = page.getByTestId("pareto-summary");
  await expect(summary).toContainText(
    `${front.front_size} run${front.front_size === 1 ? "" : "s"} on the front of ${front.feasible} feasible (6 completed`,
  );
  await expect(page.getByTestId("pareto-constraints")).toContainText("v_min ≤ 0");
  const plot = page.getByTestId("pareto-plot");
  await expect(plot).toHaveAccessibleName(/Pareto front of mean_speed and u_min/);
  await expect.poll(() => points(plot)).toBeGreaterThanOrEqual(6);
  await expect.poll(() => points(page.getByTestId("pareto-history"))).toBe(2);
  await shootCard(page, page.getByTestId("pareto").locator(".."), "pareto-front.png");
});
