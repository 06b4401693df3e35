import { useCallback, useEffect, useRef, useState } from "react";
import { useLiveStream, type LiveMessage } from "@/lib/live";

/** Watched studies, kept in the browser (docs/notifications.md). */
export const WATCHED_KEY = "windtunnel.watched-studies";
const ENDED = new Set(["completed", "completed_with_failures", "cancelled"]);
const ENDED_TEXT: Record<string, string> = {
  completed: "completed",
  completed_with_failures: "completed with failures",
  cancelled: "was cancelled",
};

function readWatched(): string[] {
  try {
    const value: unknown = JSON.parse(window.localStorage.getItem(WATCHED_KEY) ?? "[]");
    return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
  } catch {
    return [];
  }
}

function writeWatched(ids: string[]) {
  window.localStorage.setItem(WATCHED_KEY, JSON.stringify(ids));
}

export function notificationsSupported(): boolean {
  return typeof window !== "undefined" && "Notification" in window;
}

/**
 * Watch a study: while it is watched and the page is open, its live events are followed and
 * the browser shows a notification when it ends (once; the watch ends with it).
 */
export function useWatchedStudy(study: { id: string; name: string; state?: string }) {
  const [watched, setWatched] = useState(() => readWatched().includes(study.id));
  const [denied, setDenied] = useState(
    () => notificationsSupported() && Notification.permission === "denied",
  );
  const told = useRef(false);

  const notify = useCallback(
    (state: string) => {
      if (told.current || !ENDED.has(state) || !readWatched().includes(study.id)) return;
      told.current = true;
      writeWatched(readWatched().filter((id) => id !== study.id));
      setWatched(false);
      if (!notificationsSupported() || Notification.permission !== "granted") return;
      const n = new Notification(`Study ${ENDED_TEXT[state] ?? state}`, {
        body: study.name,
        tag: `windtunnel-study-${study.id}`,
      });
      n.onclick = () => {
        window.focus();
        window.location.assign(`/studies/${study.id}`);
      };
    },
    [study.id, study.name],
  );

  const active = watched && !ENDED.has(study.state ?? "");
  useLiveStream(active ? `/ws/studies/${study.id}/` : null, (message: LiveMessage) => {
    if ("state" in message && typeof message.state === "string") notify(message.state);
  });
  // the page's own snapshot may see the end first (a reconnect, a poll)
  useEffect(() => {
    if (watched && study.state) notify(study.state);
  }, [watched, study.state, notify]);

  const toggle = useCallback(async () => {
    if (watched) {
      writeWatched(readWatched().filter((id) => id !== study.id));
      setWatched(false);
      return;
    }
    if (notificationsSupported() && Notification.permission === "default") {
      const answer = await Notification.requestPermission();
      if (answer === "denied") {
        setDenied(true);
        return;
      }
    } else if (notificationsSupported() && Notification.permission === "denied") {
      setDenied(true);
      return;
    }
    told.current = false;
    writeWatched([...readWatched().filter((id) => id !== study.id), study.id]);
    setWatched(true);
  }, [watched, study.id]);

  return { watched, denied, toggle, ended: ENDED.has(study.state ?? "") };
}
