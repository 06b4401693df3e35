import { createTheme, type CSSVariablesResolver, type MantineColorsTuple } from "@mantine/core";

// A deep, slightly desaturated engineering blue; everything else stays neutral gray.
const wind: MantineColorsTuple = [
  "#eaf2fa",
  "#d4e3f2",
  "#a7c5e5",
  "#77a5d8",
  "#508acd",
  "#3779c6",
  "#2a6fc2",
  "#1c5d99",
  "#13528c",
  "#00457b",
];

export const theme = createTheme({
  primaryColor: "wind",
  colors: { wind, blue: wind },
  primaryShade: 7,
  // black or white text on filled colours, whichever reads (WCAG AA contrast)
  autoContrast: true,
  defaultRadius: "sm",
  fontFamily:
    'Inter, "Segoe UI", system-ui, -apple-system, Roboto, "Helvetica Neue", Arial, sans-serif',
  fontFamilyMonospace:
    '"JetBrains Mono", "SFMono-Regular", Menlo, Consolas, "Liberation Mono", monospace',
  headings: {
    fontWeight: "650",
    sizes: { h2: { fontSize: "1.5rem" }, h3: { fontSize: "1.15rem" }, h4: { fontSize: "1rem" } },
  },
  cursorType: "pointer",
  components: {
    Card: { defaultProps: { withBorder: true, radius: "md" } },
    Paper: { defaultProps: { radius: "md" } },
    Tooltip: { defaultProps: { openDelay: 250 } },
    // a notification's close button says what it does (axe-core's button-name)
    Notification: { defaultProps: { closeButtonProps: { "aria-label": "Close the notice" } } },
    Modal: { defaultProps: { closeButtonProps: { "aria-label": "Close the dialog" } } },
    Badge: {
      defaultProps: { radius: "sm" },
      styles: { root: { textTransform: "none", fontWeight: 600 } },
    },
  },
});

const LIGHT_VARIANT_TEXT: Record<string, string> = {
  red: "var(--mantine-color-red-9)",
  teal: "#06543d",
  cyan: "#085666",
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
  dark: {
    "--mantine-color-dimmed": "var(--mantine-color-dark-1)",
    // links: the primary's shade 4 reads at about 3.8:1 on the dark body, a lighter one at 8:1
    "--mantine-color-anchor": "var(--mantine-color-wind-2)",
  },
});
