/** What the browser tests share: the demo user they sign in as, how they sign in, and how a
 * card of a page becomes a screenshot of the docs. */
import path from "node:path";
import { expect, type Locator, type Page } from "@playwright/test";

export const USER = process.env.E2E_USER ?? "alice";
export const PASSWORD = process.env.E2E_PASSWORD ?? "alice-password";

/** Sign in through the sign-in page, as a user would. */
export async function signIn(page: Page, user = USER, password = PASSWORD) {
  await page.goto("/login");
  await page.getByLabel("Username").fill(user);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("account-menu")).toContainText(user);
}

/** The session's CSRF token, for the API calls a test makes with the page's cookies. */
export async function csrfToken(page: Page): Promise<string> {
  return (await page.context().cookies()).find((c) => c.name === "csrftoken")?.value ?? "";
}

/**
 * A card's screenshot for the docs (into SCREENSHOT_DIR, when the run makes screenshots):
 * scrolled into view, no hover state, the plots' transitions over.
 */
export async function shootCard(page: Page, card: Locator, file: string) {
  const shots = process.env.SCREENSHOT_DIR;
  if (!shots) return;
  await card.scrollIntoViewIfNeeded();
  await page.mouse.move(0, 0); // no hover state (plot toolbars) in the picture
  await page.waitForTimeout(600); // let plots finish their transition
  await card.screenshot({ path: path.join(shots, file) });
}
