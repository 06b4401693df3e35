import { MantineProvider } from "@mantine/core";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, renderHook, type RenderOptions } from "@testing-library/react";
import type { ReactElement, ReactNode } from "react";
import { MemoryRouter } from "react-router";
import { vi } from "vitest";
import { theme } from "@/app/theme";

export function testQueryClient() {
  return new QueryClient({
    defaultOptions: { queries: { retry: false, gcTime: Infinity }, mutations: { retry: false } },
  });
}

function wrapper(client: QueryClient, route: string) {
  return function Wrapper({ children }: { children: ReactNode }) {
    return (
      <MantineProvider theme={theme}>
        <QueryClientProvider client={client}>
          <MemoryRouter initialEntries={[route]}>{children}</MemoryRouter>
        </QueryClientProvider>
      </MantineProvider>
    );
  };
}

export function renderWithApp(
  ui: ReactElement,
  {
    route = "/",
    client = testQueryClient(),
    ...options
  }: RenderOptions & { route?: string; client?: QueryClient } = {},
) {
  return { client, ...render(ui, { wrapper: wrapper(client, route), ...options }) };
}

export function renderHookWithApp<T>(hook: () => T, { client = testQueryClient() } = {}) {
  return { client, ...renderHook(hook, { wrapper: wrapper(client, "/") }) };
}

type Handler = (url: URL, request: Request) => unknown | Promise<unknown>;

/** Stub fetch with JSON answers per path; unknown paths fail the test loudly. */
export function mockApi(routes: Record<string, Handler | { status: number; body: unknown }>) {
  const calls: { method: string; url: URL; body: unknown }[] = [];
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL) => {
    const request = input instanceof Request ? input : new Request(String(input));
    const url = new URL(request.url);
    const text = request.method === "GET" ? "" : await request.clone().text();
    calls.push({ method: request.method, url, body: text ? JSON.parse(text) : undefined });
    const key = `${request.method} ${url.pathname}`;
    const route = routes[key] ?? routes[url.pathname];
    if (!route) throw new Error(`unexpected request ${key}`);
    if (typeof route === "function") {
      const result = await route(url, request);
      if (result instanceof Response) return result;
      return new Response(JSON.stringify(result), {
        status: 200,
        headers: { "Content-Type": "application/json" },
      });
    }
    return new Response(JSON.stringify(route.body), {
      status: route.status,
      headers: { "Content-Type": "application/json" },
    });
  });
  return { calls, spy };
}
