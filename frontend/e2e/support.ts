/** What the browser tests share: the demo user they sign in as, and how they sign in. */
import { expect, type Page } from "@playwright/test";

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
