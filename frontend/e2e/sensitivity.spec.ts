/**
 * A study's Sensitivity card on the real stack (PostgreSQL, Redis, Celery, the run agent and
 * OpenFOAM): a grid of eight tiny lid-driven cavity runs (four lid speeds by two viscosities,
 * 5 × 5 cells, 0.05 s), the fewest an objective needs before its surrogate ranks parameters.
 * The card ranks the lid speed first for the mean speed, which scales with it.
 */
import { expect, test } from "@playwright/test";
import { csrfToken, shootCard, signIn } from "./support";

const STUDY = `E2E cavity sensitivity ${Date.now().toString(36)}`;

test("a grid study's sensitivity card ranks the parameters its objectives depend on", async ({
  page,
}) => {
  test.setTimeout(360_000);
  await signIn(page);
  const created = await page.request.post("/api/v1/studies/", {
    headers: { "X-CSRFToken": await csrfToken(page) },
    data: {
      name: STUDY,
      template: "cavity",
      parameters: {
        lid_velocity: { values: [0.5, 1, 1.5, 2] },
        nu: { values: [0.01, 0.02] },
        cells: 5,
        end_time: 0.05,
      },
    },
  });
  expect(created.status(), await created.text()).toBe(201);
  const study = (await created.json()) as { id: string };

  await page.goto(`/studies/${study.id}`);
  await expect(page.getByRole("heading", { name: STUDY })).toBeVisible();
  await expect(page.getByTestId("count-completed")).toHaveText("Completed 8", {
    timeout: 300_000,
  });

  await page.getByTestId("sensitivity-toggle").click();
  await expect(page.getByTestId("sensitivity-caption")).toContainText(
    "On a surrogate of 8 completed runs",
    { timeout: 90_000 },
  );
  await expect(page.getByTestId("sensitivity-skipped")).toHaveCount(0);
  await page.getByTestId("sensitivity-objective").getByText("mean_speed").click();
  const plot = page.getByTestId("sensitivity-plot");
  await expect(plot).toHaveAccessibleName("Sensitivity of mean_speed to the parameters");
  // the parameters top to bottom, as drawn: the one the objective depends on most on top
  const ticks = plot.locator(".ytick text");
  await expect(ticks).toHaveCount(2);
  const order = await ticks.evaluateAll((els) =>
    els
      .map((e) => ({ name: e.textContent, y: e.getBoundingClientRect().y }))
      .sort((a, b) => a.y - b.y)
      .map((t) => t.name),
  );
  expect(order).toEqual(["lid_velocity", "nu"]);
  await shootCard(
    page,
    page.locator(".mantine-Card-root", { has: page.getByTestId("sensitivity-toggle") }),
    "sensitivity.png",
  );
});
