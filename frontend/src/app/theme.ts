import { createTheme, type MantineColorsTuple } from "@mantine/core";

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
    Badge: {
      defaultProps: { radius: "sm" },
      styles: { root: { textTransform: "none", fontWeight: 600 } },
    },
  },
});
