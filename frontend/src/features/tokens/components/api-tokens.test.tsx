import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import type { ApiToken, NewApiToken } from "../api/tokens";
import { ApiTokens } from "./api-tokens";

const laptop: ApiToken = {
  id: 7,
  name: "laptop",
  prefix: "wt_abc1234",
  created_at: "2026-01-02T10:00:00Z",
  last_used_at: null,
  expires_at: null,
  expired: false,
};
const old: ApiToken = {
  id: 3,
  name: "old ci",
  prefix: "wt_zzz9999",
  created_at: "2025-01-02T10:00:00Z",
  last_used_at: "2025-02-01T10:00:00Z",
  expires_at: "2025-03-01T10:00:00Z",
  expired: true,
};

describe("ApiTokens", () => {
  it("lists tokens by name and prefix, never a key, and says which expired", async () => {
    mockApi({ "GET /api/v1/tokens/": () => [laptop, old] });
    renderWithApp(<ApiTokens />);
    const table = await screen.findByTestId("tokens-table");
    const rows = within(table).getAllByRole("row").slice(1);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toHaveTextContent("laptop");
    expect(rows[0]).toHaveTextContent("wt_abc1234…");
    expect(rows[0]).toHaveTextContent(/never.*never/); // not used yet, does not expire
    expect(rows[1]).toHaveTextContent("old ci");
    expect(within(rows[1]!).getByText(/^expired/)).toBeInTheDocument();
  });

  it("creates a token with the chosen expiry and shows its key once, with a warning", async () => {
    const made: NewApiToken = {
      ...laptop,
      id: 9,
      name: "ci",
      prefix: "wt_new0000",
      key: "wt_new0000-the-whole-secret-key",
      expires_at: "2026-02-01T10:00:00Z",
    };
    let listed: ApiToken[] = [laptop];
    const { calls } = mockApi({
      "GET /api/v1/tokens/": () => listed,
      "POST /api/v1/tokens/": () => {
        listed = [{ ...laptop, id: made.id, name: made.name, prefix: made.prefix }, laptop];
        return new Response(JSON.stringify(made), {
          status: 201,
          headers: { "Content-Type": "application/json" },
        });
      },
    });
    renderWithApp(<ApiTokens />);
    await screen.findByTestId("tokens-table");
    await userEvent.type(screen.getByLabelText(/Name/), "ci");
    await userEvent.click(screen.getByRole("radio", { name: "30 days" }));
    await userEvent.click(screen.getByRole("button", { name: "Create token" }));

    const shown = await screen.findByTestId("new-token");
    expect(within(shown).getByTestId("new-token-key")).toHaveTextContent(made.key);
    expect(shown).toHaveTextContent("only time the portal shows this key");
    expect(within(shown).getByRole("button", { name: "Copy token" })).toBeInTheDocument();
    const post = calls.find((c) => c.method === "POST")!;
    expect(post.body).toEqual({ name: "ci", expires_in_days: 30 });
    // the list is read again and holds the new token, without its key
    await waitFor(() =>
      expect(within(screen.getByTestId("tokens-table")).getAllByRole("row")).toHaveLength(3),
    );
    expect(screen.getByTestId("tokens-table")).not.toHaveTextContent(made.key);

    // once dismissed, the key is gone from the page for good
    await userEvent.click(screen.getByRole("button", { name: "I have copied it" }));
    expect(screen.queryByText(made.key)).not.toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Create token" })).toBeInTheDocument();
  });

  it("sends no expiry for Never and asks for a name before calling the server", async () => {
    const { calls } = mockApi({
      "GET /api/v1/tokens/": () => [],
      "POST /api/v1/tokens/": { status: 201, body: { ...laptop, key: "wt_x" } },
    });
    renderWithApp(<ApiTokens />);
    expect(await screen.findByText("No API tokens yet")).toBeInTheDocument();
    await userEvent.click(screen.getByRole("button", { name: "Create token" }));
    expect(screen.getByText(/Give the token a name/)).toBeInTheDocument();
    expect(calls.filter((c) => c.method === "POST")).toHaveLength(0);

    await userEvent.type(screen.getByLabelText(/Name/), "forever");
    await userEvent.click(screen.getByRole("radio", { name: "Never" }));
    await userEvent.click(screen.getByRole("button", { name: "Create token" }));
    await screen.findByTestId("new-token");
    expect(calls.find((c) => c.method === "POST")!.body).toEqual({
      name: "forever",
      expires_in_days: null,
    });
  });

  it("shows the portal's message at the name when the name is taken", async () => {
    mockApi({
      "GET /api/v1/tokens/": () => [laptop],
      "POST /api/v1/tokens/": {
        status: 400,
        body: {
          code: "invalid",
          message: "you have a token named 'laptop' already; choose another name",
          field: "name",
        },
      },
    });
    renderWithApp(<ApiTokens />);
    await screen.findByTestId("tokens-table");
    await userEvent.type(screen.getByLabelText(/Name/), "laptop");
    await userEvent.click(screen.getByRole("button", { name: "Create token" }));
    expect(await screen.findByText(/a token named 'laptop' already/)).toBeInTheDocument();
    expect(screen.queryByTestId("new-token")).not.toBeInTheDocument();
  });

  it("revokes a token only after the confirmation", async () => {
    let listed: ApiToken[] = [laptop, old];
    const { calls } = mockApi({
      "GET /api/v1/tokens/": () => listed,
      "DELETE /api/v1/tokens/3/": () => {
        listed = [laptop];
        return new Response(null, { status: 204 });
      },
    });
    renderWithApp(<ApiTokens />);
    await screen.findByTestId("tokens-table");
    await userEvent.click(screen.getByRole("button", { name: "Revoke old ci" }));
    const dialog = await screen.findByRole("dialog");
    expect(dialog).toHaveTextContent("stop working at once");
    await userEvent.click(within(dialog).getByRole("button", { name: "Keep it" }));
    expect(calls.filter((c) => c.method === "DELETE")).toHaveLength(0);

    await userEvent.click(screen.getByRole("button", { name: "Revoke old ci" }));
    await userEvent.click(
      within(await screen.findByRole("dialog")).getByRole("button", { name: "Revoke token" }),
    );
    await waitFor(() => expect(calls.filter((c) => c.method === "DELETE")).toHaveLength(1));
    await waitFor(() => expect(screen.queryByText("old ci")).not.toBeInTheDocument());
    expect(screen.getByText("laptop")).toBeInTheDocument();
  });
});
