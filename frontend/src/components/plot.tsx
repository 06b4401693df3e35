import { Box, Center, Loader, Text, useComputedColorScheme, VisuallyHidden } from "@mantine/core";
import { useEffect, useId, useMemo, useRef, useState } from "react";
import type { Config, Data, Layout, PlotlyHTMLElement } from "plotly.js";
import { describeTraces } from "@/lib/plot-summary";
import { AXIS_COLORS } from "@/lib/plot-theme";
import { loadPlotly, type PlotlyModule } from "@/lib/plotly";

const baseLayout: Partial<Layout> = {
  margin: { l: 64, r: 16, t: 30, b: 48 },
  font: { family: "Inter, system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size: 12 },
  paper_bgcolor: "rgba(0,0,0,0)",
  plot_bgcolor: "rgba(0,0,0,0)",
  hovermode: "closest",
  // top left: the plot's toolbar appears top right on hover
  legend: { orientation: "h", x: 0, xanchor: "left", y: 1, yanchor: "bottom", font: { size: 11 } },
  colorway: [
    "#1c5d99",
    "#e07a1f",
    "#2b9348",
    "#c1121f",
    "#7b2cbf",
    "#00838f",
    "#8d6e63",
    "#5c677d",
    "#d81b60",
    "#9e9d24",
  ],
};

/**
 * The plots' colours for the dark theme (the page follows the system's prefers-color-scheme):
 * light text and faint grid lines on the card's dark background. A Plotly template, so a
 * plot's own axis settings still apply on top of it.
 */
const DARK_TEMPLATE = {
  layout: {
    font: { color: "#c9c9c9" },
    xaxis: AXIS_COLORS.dark,
    yaxis: AXIS_COLORS.dark,
    hoverlabel: { bgcolor: "#2e2e2e", font: { color: "#e9ecef" } },
    legend: { font: { color: "#c9c9c9" } },
    coloraxis: { colorbar: { tickfont: { color: "#c9c9c9" } } },
  },
} as const;
const LIGHT_TEMPLATE = {
  layout: {
    font: { color: "#343a40" },
    xaxis: AXIS_COLORS.light,
    yaxis: AXIS_COLORS.light,
  },
} as const;

const baseConfig: Partial<Config> = {
  displaylogo: false,
  responsive: true,
  modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d"],
  toImageButtonOptions: { format: "png", scale: 2 },
};

export interface PlotProps {
  data: Data[];
  layout?: Partial<Layout>;
  config?: Partial<Config>;
  /** Fixed height, so the page never jumps while data arrives. */
  height?: number;
  /** Shown instead of an empty plot. */
  emptyMessage?: string | undefined;
  "aria-label": string;
  "data-testid"?: string;
  onPointClick?: (point: { x: unknown; y: unknown; customdata: unknown }) => void;
}

/** The element Plotly drew into: it adds its event methods to it. */
function isPlotlyElement(el: HTMLElement): el is PlotlyHTMLElement {
  return (
    "on" in el &&
    typeof el.on === "function" &&
    "removeAllListeners" in el &&
    typeof el.removeAllListeners === "function"
  );
}

function countPoints(data: Data[]): number {
  let total = 0;
  for (const trace of data) {
    const x = (trace as { x?: ArrayLike<unknown> }).x;
    const z = (trace as { z?: ArrayLike<unknown> }).z;
    total += x?.length ?? z?.length ?? 0;
  }
  return total;
}

/**
 * A thin React wrapper over Plotly.react: updates in place (no re-creation), keeps zoom
 * (uirevision), purges on unmount and follows its container's width.
 */
export function Plot({
  data,
  layout,
  config,
  height = 320,
  emptyMessage,
  onPointClick,
  ...rest
}: PlotProps) {
  const ref = useRef<HTMLDivElement>(null);
  const scheme = useComputedColorScheme("light");
  const [ready, setReady] = useState<PlotlyModule | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  const clickRef = useRef(onPointClick);
  clickRef.current = onPointClick;
  const points = countPoints(data);
  const empty = points === 0 && !!emptyMessage;
  const summaryId = useId();
  const summary = useMemo(
    () => (empty ? (emptyMessage ?? "") : describeTraces(data)),
    [data, empty, emptyMessage],
  );

  useEffect(() => {
    let alive = true;
    loadPlotly()
      .then((m) => alive && setReady(() => m))
      .catch((e: unknown) => alive && setFailed(String(e)));
    return () => {
      alive = false;
    };
  }, []);

  useEffect(() => {
    const el = ref.current;
    if (!ready || !el) return;
    void ready
      .react(
        el,
        data,
        {
          ...baseLayout,
          template: scheme === "dark" ? DARK_TEMPLATE : LIGHT_TEMPLATE,
          height,
          uirevision: "keep",
          ...layout,
        } as Partial<Layout>,
        { ...baseConfig, ...config },
      )
      .then(() => {
        if (!isPlotlyElement(el)) return; // Plotly did not draw into it (a test's stand-in)
        el.removeAllListeners("plotly_click");
        el.on("plotly_click", (ev) => {
          const p = ev.points[0];
          if (p && clickRef.current) clickRef.current(p);
        });
      });
  }, [ready, data, layout, config, height, scheme]);

  useEffect(() => {
    const el = ref.current;
    return () => {
      if (el && ready) ready.purge(el);
    };
  }, [ready]);

  useEffect(() => {
    const el = ref.current;
    if (!el || !ready || typeof ResizeObserver === "undefined") return;
    const observer = new ResizeObserver(() => ready.Plots.resize(el));
    observer.observe(el);
    return () => observer.disconnect();
  }, [ready]);

  return (
    <Box
      pos="relative"
      h={height}
      role="figure"
      aria-label={rest["aria-label"]}
      aria-describedby={summaryId}
      data-testid={rest["data-testid"]}
      data-points={points}
      data-theme={scheme}
    >
      <VisuallyHidden id={summaryId} data-testid="plot-summary">
        {summary}
      </VisuallyHidden>
      <div ref={ref} style={{ width: "100%", height, visibility: empty ? "hidden" : "visible" }} />
      {(!ready || empty || failed) && (
        <Center pos="absolute" inset={0}>
          {failed ? (
            <Text c="var(--mantine-color-red-light-color)" size="sm">
              The plotting library failed to load: {failed}
            </Text>
          ) : !ready ? (
            <Loader size="sm" type="dots" />
          ) : (
            <Text c="dimmed" size="sm" ta="center" maw={360}>
              {emptyMessage}
            </Text>
          )}
        </Center>
      )}
    </Box>
  );
}
