import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import { mockApi, renderWithApp } from "@/test/render";
import { LoginForm } from "./login-form";

describe("LoginForm", () => {
  it("asks for what is missing before calling the server", async () => {
    const { calls } = mockApi({});
    renderWithApp(<LoginForm onSignedIn={() => {}} />);
    await userEvent.click(screen.getByRole("button", { name: "Sign in" }));
    expect(screen.getByText("Enter your username")).toBeInTheDocument();
    expect(screen.getByText("Enter your password")).toBeInTheDocument();
    expect(calls).toHaveLength(0);
  });

  it("says clearly when the password is wrong", async () => {
    mockApi({
      "GET /api/v1/auth/csrf/": () => {
        document.cookie = "csrftoken=abc";
        return { csrf_token: "abc" };
      },
      "POST /api/v1/auth/login/": {
        status: 401,
        body: { code: "not_authenticated", message: "wrong username or password", field: null },
      },
    });
    renderWithApp(<LoginForm onSignedIn={() => {}} />);
    await userEvent.type(screen.getByLabelText("Username"), "alice");
    await userEvent.type(screen.getByLabelText("Password"), "nope");
    await userEvent.click(screen.getByRole("button", { name: "Sign in" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("Wrong username or password");
  });

  it("sends the CSRF token and signs in", async () => {
    const onSignedIn = vi.fn();
    const { calls } = mockApi({
      "GET /api/v1/auth/csrf/": () => {
        document.cookie = "csrftoken=tok123";
        return { csrf_token: "tok123" };
      },
      "POST /api/v1/auth/login/": (_url, request) => {
        expect(request.headers.get("X-CSRFToken")).toBe("tok123");
        return { username: "alice", tenant: "aero", is_admin: false, is_staff: false };
      },
    });
    renderWithApp(<LoginForm onSignedIn={onSignedIn} />);
    await userEvent.type(screen.getByLabelText("Username"), "alice");
    await userEvent.type(screen.getByLabelText("Password"), "secret");
    await userEvent.click(screen.getByRole("button", { name: "Sign in" }));
    await waitFor(() => expect(onSignedIn).toHaveBeenCalled());
    expect(calls.at(-1)!.body).toEqual({ username: "alice", password: "secret" });
  });
});
