import { act, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type FakeSocket, stubWebSockets } from "@/test/fake-socket";
import { renderWithApp } from "@/test/render";
import { WATCHED_KEY } from "../hooks/use-watched-study";
import { NotifyBell } from "./notify-bell";

const shown: { title: string; body?: string }[] = [];
let sockets: FakeSocket[] = [];

class FakeNotification {
  static permission: NotificationPermission = "default";
  static requestPermission = vi.fn(async () => {
    FakeNotification.permission = "granted";
    return "granted" as NotificationPermission;
  });
  onclick: (() => void) | null = null;
  constructor(title: string, options?: NotificationOptions) {
    shown.push({ title, body: options?.body });
  }
}

beforeEach(() => {
  shown.length = 0;
  FakeNotification.permission = "default";
  window.localStorage.clear();
  vi.stubGlobal("Notification", FakeNotification);
  sockets = stubWebSockets();
});
afterEach(() => vi.unstubAllGlobals());

const study = { id: "s-1", name: "lid sweep", state: "running" };

describe("NotifyBell", () => {
  it("asks for permission, keeps the watch and notifies once when the live stream says the study ended", async () => {
    renderWithApp(<NotifyBell study={study} />);
    await userEvent.click(screen.getByRole("button", { name: "Notify me" }));
    expect(FakeNotification.requestPermission).toHaveBeenCalled();
    expect(JSON.parse(window.localStorage.getItem(WATCHED_KEY) ?? "[]")).toEqual(["s-1"]);
    await waitFor(() =>
      expect(sockets.map((s) => s.url)).toContain("ws://localhost:3000/ws/studies/s-1/"),
    );
    const socket = sockets.find((s) => s.url.endsWith("/ws/studies/s-1/"))!;
    act(() => socket.push({ type: "runs", id: "s-1", seq: 4, state: "running" }));
    expect(shown).toEqual([]);
    act(() => socket.push({ type: "study", id: "s-1", seq: 5, state: "completed_with_failures" }));
    expect(shown).toEqual([{ title: "Study completed with failures", body: "lid sweep" }]);
    act(() => socket.push({ type: "study", id: "s-1", seq: 6, state: "completed_with_failures" }));
    expect(shown).toHaveLength(1); // once
    expect(JSON.parse(window.localStorage.getItem(WATCHED_KEY) ?? "[]")).toEqual([]);
  });

  it("notifies from the page's own snapshot too, and not for an unwatched study", async () => {
    FakeNotification.permission = "granted";
    window.localStorage.setItem(WATCHED_KEY, JSON.stringify(["s-1"]));
    const { rerender } = renderWithApp(<NotifyBell study={study} />);
    expect(screen.getByRole("button", { name: "Stop notifying me" })).toBeInTheDocument();
    rerender(<NotifyBell study={{ ...study, state: "cancelled" }} />);
    expect(shown).toEqual([{ title: "Study was cancelled", body: "lid sweep" }]);

    shown.length = 0;
    const other = renderWithApp(<NotifyBell study={{ id: "s-2", name: "b", state: "running" }} />);
    other.rerender(<NotifyBell study={{ id: "s-2", name: "b", state: "completed" }} />);
    expect(shown).toEqual([]);
  });

  it("says how to unblock notifications when the browser refuses them", async () => {
    FakeNotification.permission = "denied";
    renderWithApp(<NotifyBell study={study} />);
    await userEvent.click(screen.getByRole("button", { name: "Notify me" }));
    expect(window.localStorage.getItem(WATCHED_KEY)).toBeNull();
    await userEvent.hover(screen.getByRole("button", { name: "Notify me" }));
    expect(await screen.findByText(/allow them in its site settings/)).toBeInTheDocument();
  });
});
