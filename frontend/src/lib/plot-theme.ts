/**
 * The plots' axis colours in each colour scheme (the page follows the system's
 * prefers-color-scheme): faint grid lines on the card's background, never white on dark.
 * `components/plot.tsx` makes its Plotly templates of them; a plot that sets its own axes
 * (the surrogate map) takes them from here.
 */
export const AXIS_COLORS = {
  light: { gridcolor: "#e9ecef", zerolinecolor: "#ced4da", linecolor: "#ced4da" },
  dark: { gridcolor: "#3a3a3a", zerolinecolor: "#5c5c5c", linecolor: "#5c5c5c" },
} as const;
