import { render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Plot } from "@/components/plot";
import { Providers } from "./providers";

const realMatchMedia = window.matchMedia;
afterEach(() => {
  window.matchMedia = realMatchMedia;
  vi.restoreAllMocks();
});

/** The system setting (prefers-color-scheme), as the browser reports it. */
function systemPrefers(dark: boolean) {
  window.matchMedia = ((query: string) => ({
    ...realMatchMedia(query),
    matches: dark && query.includes("prefers-color-scheme: dark"),
  })) as typeof window.matchMedia;
}

describe("the theme", () => {
  it("follows a dark system setting, plots included", async () => {
    systemPrefers(true);
    render(
      <Providers>
        <Plot data={[]} aria-label="residuals" data-testid="plot" />
      </Providers>,
    );
    await waitFor(() =>
      expect(document.documentElement).toHaveAttribute("data-mantine-color-scheme", "dark"),
    );
    expect(screen.getByTestId("plot")).toHaveAttribute("data-theme", "dark");
  });

  it("stays light on a light system", async () => {
    systemPrefers(false);
    render(
      <Providers>
        <Plot data={[]} aria-label="residuals" data-testid="plot" />
      </Providers>,
    );
    await waitFor(() =>
      expect(document.documentElement).toHaveAttribute("data-mantine-color-scheme", "light"),
    );
    expect(screen.getByTestId("plot")).toHaveAttribute("data-theme", "light");
  });
});
