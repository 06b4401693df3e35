// Stands in for plotly.js-dist-min in production builds, which load Plotly from its own
// asset instead (vite.config.ts, components/plot.tsx). Never called.
export default {};
