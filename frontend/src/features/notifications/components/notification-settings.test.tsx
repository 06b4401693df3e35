import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { NotificationSettings } from "./notification-settings";

const hook = {
  id: "w-1",
  url: "https://hooks.example.org/wt",
  description: "",
  events: ["study.completed"],
  scope: "personal",
  owner: "ada",
  active: true,
  disabled_reason: "",
  secret_prefix: "whsec_abcd",
  created_at: "2026-11-24T10:00:00Z",
  updated_at: "2026-11-24T10:00:00Z",
};
const delivery = (status: number, state: string) => ({
  id: `d-${status}`,
  event_id: "e-1",
  event_type: "ping",
  state,
  attempts: 1,
  max_attempts: 1,
  next_attempt_at: null,
  last_status_code: status,
  delivered_at: null,
  created_at: "2026-11-24T10:01:00Z",
  attempts_log: [
    {
      number: 1,
      created_at: "2026-11-24T10:01:00Z",
      status_code: status,
      error: "",
      duration_ms: 12,
      next_retry_at: null,
    },
  ],
});
const page = (results: unknown[]) => ({
  count: results.length,
  next: null,
  previous: null,
  results,
});
const email = { email: "", events: [], scope: "own" };

describe("NotificationSettings", () => {
  it("creates a webhook with the chosen events and shows its secret once", async () => {
    document.cookie = "csrftoken=t";
    let hooks: unknown[] = [];
    const { calls } = mockApi({
      "GET /api/v1/notifications/webhooks/": () => page(hooks),
      "POST /api/v1/notifications/webhooks/": () => {
        hooks = [hook];
        return {
          ...hook,
          events: ["study.completed", "run.diverged"],
          secret: "whsec_abcd-secret",
        };
      },
      "GET /api/v1/notifications/email/": () => email,
    });
    renderWithApp(<NotificationSettings isAdmin={false} />);
    expect(await screen.findByText("No webhooks yet.")).toBeInTheDocument();
    await userEvent.type(screen.getByLabelText("URL"), "https://hooks.example.org/wt");
    await userEvent.click(screen.getAllByLabelText("Run diverged")[0]!); // the webhook form comes first
    await userEvent.click(screen.getByRole("button", { name: "Add webhook" }));
    expect(await screen.findByTestId("webhook-secret")).toHaveTextContent("whsec_abcd-secret");
    const post = calls.find((c) => c.method === "POST")!;
    expect(post.body).toEqual({
      url: "https://hooks.example.org/wt",
      events: ["study.completed", "run.diverged"],
      scope: "personal",
    });
    expect(await screen.findByTestId("webhook")).toHaveTextContent("secret whsec_abcd…");
  });

  it("shows the server's reason when a webhook is refused", async () => {
    document.cookie = "csrftoken=t";
    mockApi({
      "GET /api/v1/notifications/webhooks/": () => page([]),
      "POST /api/v1/notifications/webhooks/": {
        status: 400,
        body: {
          code: "invalid",
          message: "the URL must start with http:// or https://; got ftp:",
          field: "url",
        },
      },
      "GET /api/v1/notifications/email/": () => email,
    });
    renderWithApp(<NotificationSettings isAdmin={false} />);
    await userEvent.type(await screen.findByLabelText("URL"), "ftp://x");
    await userEvent.click(screen.getByRole("button", { name: "Add webhook" }));
    expect(await screen.findByRole("alert")).toHaveTextContent(
      "must start with http:// or https://",
    );
  });

  it("sends a test and shows the result, and lists the delivery log with status codes", async () => {
    document.cookie = "csrftoken=t";
    mockApi({
      "GET /api/v1/notifications/webhooks/": () => page([hook]),
      "POST /api/v1/notifications/webhooks/w-1/test/": () => delivery(500, "failed"),
      "GET /api/v1/notifications/webhooks/w-1/deliveries/": () =>
        page([delivery(500, "failed"), delivery(200, "delivered")]),
      "GET /api/v1/notifications/email/": () => email,
    });
    renderWithApp(<NotificationSettings isAdmin={false} />);
    await userEvent.click(await screen.findByRole("button", { name: "Send test" }));
    expect(await screen.findByTestId("test-result")).toHaveTextContent("the receiver answered 500");
    await userEvent.click(screen.getByRole("button", { name: "Deliveries" }));
    const log = await screen.findByTestId("delivery-log");
    const rows = within(log).getAllByRole("row").slice(1);
    expect(rows.map((r) => within(r).getAllByRole("cell")[3]!.textContent)).toEqual(["500", "200"]);
    expect(rows.map((r) => within(r).getAllByRole("cell")[4]!.textContent)).toEqual([
      "12 ms",
      "12 ms",
    ]);
  });
});
