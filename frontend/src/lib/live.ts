/**
 * Websocket streams (docs/live.md): one socket per path however many hooks listen, with
 * reconnects. Messages carry {type, id, seq}; the hooks that use them keep the REST snapshot's
 * `last_seq`, apply newer events and reload on a gap, so a dropped message costs a refetch,
 * never a wrong plot.
 */
import { useEffect, useRef, useState } from "react";
import type { components } from "@/generated/api";
import { env } from "./env";

type Schemas = components["schemas"];

/**
 * A stream's events, told apart by `type` (their schema: backend/telemetry/schemas/
 * live-messages.json, published with the API's): subscribed, telemetry and state on a run's
 * stream; subscribed, runs, study and study.objectives on a study's. The transport's own
 * `pong` never reaches a listener.
 */
export type LiveMessage = Exclude<Schemas["LiveMessage"], Schemas["LivePong"]>;
export type LiveTelemetry = Schemas["LiveTelemetry"];
export type LiveRunState = Schemas["LiveRunState"];
export type LiveRuns = Schemas["LiveRuns"];
/** A run as a `state` or `runs` event carries it. */
export type LiveRun = Schemas["LiveRun"];

const EVENT_TYPES: ReadonlySet<string> = new Set<LiveMessage["type"]>([
  "subscribed",
  "telemetry",
  "state",
  "runs",
  "study",
  "study.objectives",
]);

/** A parsed frame that is one of the events (the server validates them; this guards shape). */
export function isLiveMessage(value: unknown): value is LiveMessage {
  return (
    typeof value === "object" &&
    value !== null &&
    "type" in value &&
    typeof value.type === "string" &&
    EVENT_TYPES.has(value.type) &&
    "id" in value &&
    typeof value.id === "string" &&
    "seq" in value &&
    typeof value.seq === "number"
  );
}

type Listener = (message: LiveMessage) => void;
type StatusListener = (connected: boolean) => void;

interface Stream {
  socket: WebSocket | null;
  listeners: Set<Listener>;
  status: Set<StatusListener>;
  connected: boolean;
  retry: number;
  timer: ReturnType<typeof setTimeout> | null;
  closed: boolean;
}

const streams = new Map<string, Stream>();
// 4401: not signed in; 4404: no such object in this tenant. Reconnecting will not help.
const FINAL_CODES = new Set([4401, 4403, 4404]);

export function liveUrl(path: string): string {
  const base = new URL(env.apiBase || window.location.origin);
  base.protocol = base.protocol === "https:" ? "wss:" : "ws:";
  base.pathname = path;
  return base.toString();
}

function setConnected(stream: Stream, connected: boolean) {
  stream.connected = connected;
  stream.status.forEach((s) => s(connected));
}

function open(path: string, stream: Stream) {
  if (stream.closed || typeof WebSocket === "undefined") return;
  const socket = new WebSocket(liveUrl(path));
  stream.socket = socket;
  socket.onopen = () => {
    stream.retry = 0;
  };
  socket.onmessage = (event) => {
    let message: unknown;
    try {
      message = JSON.parse(String(event.data));
    } catch {
      return;
    }
    if (!isLiveMessage(message)) return;
    if (message.type === "subscribed") setConnected(stream, true);
    stream.listeners.forEach((l) => l(message));
  };
  socket.onclose = (event) => {
    stream.socket = null;
    setConnected(stream, false);
    if (stream.closed || FINAL_CODES.has(event.code)) return;
    const delay = Math.min(15_000, 1000 * 2 ** stream.retry);
    stream.retry += 1;
    stream.timer = setTimeout(() => open(path, stream), delay);
  };
}

export function subscribeLive(
  path: string,
  listener: Listener,
  status?: StatusListener,
): () => void {
  let stream = streams.get(path);
  if (!stream) {
    stream = {
      socket: null,
      listeners: new Set(),
      status: new Set(),
      connected: false,
      retry: 0,
      timer: null,
      closed: false,
    };
    streams.set(path, stream);
    open(path, stream);
  }
  stream.listeners.add(listener);
  if (status) {
    stream.status.add(status);
    status(stream.connected);
  }
  const s = stream;
  return () => {
    s.listeners.delete(listener);
    if (status) s.status.delete(status);
    if (s.listeners.size === 0) {
      s.closed = true;
      if (s.timer) clearTimeout(s.timer);
      s.socket?.close(1000);
      streams.delete(path);
    }
  };
}

/**
 * Listen to a stream while `path` is set. Returns whether the stream is subscribed, so
 * callers can slow their polling down to a safety net.
 */
export function useLiveStream(path: string | null, onMessage: Listener): boolean {
  const handler = useRef(onMessage);
  handler.current = onMessage;
  const [connected, setConnected] = useState(false);
  useEffect(() => {
    if (!path) {
      setConnected(false);
      return;
    }
    return subscribeLive(path, (m) => handler.current(m), setConnected);
  }, [path]);
  return connected;
}

/** While a stream is subscribed, polling only guards against a silent socket. */
export const LIVE_SAFETY_POLL_MS = 15_000;
