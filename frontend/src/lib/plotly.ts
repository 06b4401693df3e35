export type PlotlyModule = typeof import("plotly.js-dist-min");

declare const __PLOTLY_URL__: string;

declare global {
  interface Window {
    /** Set by Plotly's own bundle when it is loaded as a script (production builds). */
    Plotly?: PlotlyModule;
  }
}

let plotly: Promise<PlotlyModule> | null = null;

function loadScript(src: string): Promise<PlotlyModule> {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = src;
    script.async = true;
    script.onload = () => {
      const loaded = window.Plotly;
      if (loaded) resolve(loaded);
      else reject(new Error("Plotly did not register itself"));
    };
    script.onerror = () => reject(new Error(`could not load ${src}`));
    document.head.appendChild(script);
  });
}

/** Plotly is big: load it once, on the first plot (or when the app is idle). */
export function loadPlotly(): Promise<PlotlyModule> {
  plotly ??= (
    __PLOTLY_URL__
      ? loadScript(__PLOTLY_URL__)
      : import("plotly.js-dist-min").then((m) => (m.default ?? m) as PlotlyModule)
  ).catch((e: unknown) => {
    plotly = null; // let a later plot try again
    throw e;
  });
  return plotly;
}
