/**
 * The admin page's warm pools against the real stack and the loopback OpenStack: an operator
 * creates a pool, and each refusal of the API (max below min, an unknown flavor, more workers
 * than the cloud project allows) shows under the field it names; the pool then appears with
 * the flavor's size read from the cloud, and a delete without live workers removes it.
 *
 * Needs the OpenStack backend scripts/test-frontend adds when a loopback cloud runs
 * (E2E_CLOUD_BACKEND, E2E_CLOUD_IMAGE); skipped without it.
 */
import { expect, test } from "@playwright/test";
import { signIn } from "./support";

const BACKEND = process.env.E2E_CLOUD_BACKEND;
const IMAGE = process.env.E2E_CLOUD_IMAGE ?? "";
const POOL = `e2e-pool-${Date.now().toString(36)}`;

test.skip(!BACKEND, "no loopback OpenStack backend (scripts/start-openstack)");

test("an operator creates a warm pool, told what is wrong field by field, then deletes it", async ({
  page,
}) => {
  await signIn(page);
  await page.goto("/operations/pools");
  await page.getByRole("button", { name: "New pool" }).click();
  const form = page.getByRole("form", { name: "New warm pool" });
  await expect(form.getByRole("textbox", { name: "Backend" })).toHaveValue(BACKEND!);
  await form.getByRole("textbox", { name: "Name" }).fill(POOL);
  await form.getByRole("textbox", { name: "Flavor" }).fill("wt.nope");
  await form.getByRole("textbox", { name: "Image" }).fill(IMAGE);
  await form.getByRole("textbox", { name: "Min workers" }).fill("3");
  await form.getByRole("textbox", { name: "Max workers" }).fill("2");
  const create = form.getByRole("button", { name: "Create pool" });

  // max below min
  await create.click();
  await expect(
    form.getByText(/max_workers \(2\) must be at least min_workers \(3\)/),
  ).toBeVisible();
  await expect(form.getByRole("textbox", { name: "Max workers" })).toHaveAttribute(
    "aria-invalid",
    "true",
  );

  // a flavor the cloud does not know
  await form.getByRole("textbox", { name: "Min workers" }).fill("0");
  await create.click();
  await expect(form.getByRole("textbox", { name: "Flavor" })).toHaveAttribute(
    "aria-invalid",
    "true",
  );
  await expect(form.getByText(/wt\.nope/)).toBeVisible();

  // more workers than the project's 50 instances
  await form.getByRole("textbox", { name: "Flavor" }).fill("wt.small");
  await form.getByRole("textbox", { name: "Max workers" }).fill("60");
  await create.click();
  await expect(form.getByText(/the OpenStack project allows 50/)).toBeVisible();
  await expect(form.getByRole("textbox", { name: "Flavor" })).toHaveAttribute(
    "aria-invalid",
    "false",
  );

  // right: created, its size read from the flavor
  await form.getByRole("textbox", { name: "Max workers" }).fill("2");
  await create.click();
  await expect(form).toBeHidden();
  await expect(page.getByRole("heading", { name: POOL, exact: true })).toBeVisible();
  await expect(page.getByText(/wt\.small: 1 core, 1 GB/)).toBeVisible();
  await expect(page.getByRole("form", { name: `Bounds of ${POOL}` })).toBeVisible();

  // no live worker (min 0, nothing waits): deleted at once
  await page.getByRole("button", { name: `Delete ${POOL}` }).click();
  await expect(page.getByText("It has no live worker: it is deleted at once.")).toBeVisible();
  await page.getByRole("button", { name: "Delete pool" }).click();
  await expect(page.getByRole("heading", { name: POOL, exact: true })).toBeHidden();
  await expect(page.getByText("No warm pools")).toBeVisible();
});
