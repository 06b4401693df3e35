import { vi } from "vitest";

/** A websocket the test drives: it records what opened it and delivers what the test pushes. */
export class FakeSocket {
  onopen: (() => void) | null = null;
  onmessage: ((e: { data: string }) => void) | null = null;
  onclose: ((e: { code: number }) => void) | null = null;
  constructor(
    readonly url: string,
    opened: FakeSocket[],
  ) {
    opened.push(this);
  }
  close() {}
  /** A message from the server. */
  push(message: object) {
    this.onmessage?.({ data: JSON.stringify(message) });
  }
}

/**
 * Replace the browser's WebSocket (until `vi.unstubAllGlobals()`); the sockets the app opens
 * from then on are appended to the list returned.
 */
export function stubWebSockets(): FakeSocket[] {
  const opened: FakeSocket[] = [];
  vi.stubGlobal(
    "WebSocket",
    class extends FakeSocket {
      constructor(url: string) {
        super(url, opened);
      }
    },
  );
  return opened;
}
