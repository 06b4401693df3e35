import "@mantine/core/styles.css";
import "@mantine/notifications/styles.css";
import "@mantine/dropzone/styles.css";
import "./global.css";

import { MantineProvider, type CSSVariablesResolver } from "@mantine/core";
import { Notifications } from "@mantine/notifications";
import { QueryClientProvider, type QueryClient } from "@tanstack/react-query";
import { useState, type ReactNode } from "react";
import { makeQueryClient } from "./query-client";
import { theme } from "./theme";

const LIGHT_VARIANT_TEXT: Record<string, string> = {
  red: "var(--mantine-color-red-9)",
  teal: "var(--mantine-color-teal-9)",
  cyan: "var(--mantine-color-cyan-9)",
  blue: "var(--mantine-color-blue-9)",
  wind: "var(--mantine-color-wind-9)",
  gray: "var(--mantine-color-gray-8)",
  grape: "var(--mantine-color-grape-9)",
  violet: "var(--mantine-color-violet-9)",
  indigo: "var(--mantine-color-indigo-9)",
  green: "#1e6b2e",
  lime: "#4a6b0b",
  yellow: "#7a5200",
  orange: "#a33d00",
};

/**
 * Secondary ("dimmed") text dark enough to read: Mantine's default light gray-6 is below the
 * WCAG AA contrast of 4.5:1 on white (axe-core's color-contrast rule).
 */
export const cssVariablesResolver: CSSVariablesResolver = () => ({
  variables: {},
  light: {
    "--mantine-color-dimmed": "var(--mantine-color-gray-7)",
    // the text of light and subtle badges and buttons: dark shades (shade 6, Mantine's
    // default, reads at about 3:1 on its pale background)
    ...Object.fromEntries(
      Object.entries(LIGHT_VARIANT_TEXT).map(([c, v]) => [`--mantine-color-${c}-light-color`, v]),
    ),
  },
  dark: { "--mantine-color-dimmed": "var(--mantine-color-dark-1)" },
});

export function Providers({ children, client }: { children: ReactNode; client?: QueryClient }) {
  const [queryClient] = useState(() => client ?? makeQueryClient());
  return (
    <MantineProvider
      theme={theme}
      defaultColorScheme="auto"
      cssVariablesResolver={cssVariablesResolver}
    >
      <Notifications position="bottom-right" limit={4} />
      <QueryClientProvider client={queryClient}>{children}</QueryClientProvider>
    </MantineProvider>
  );
}
