declare module "plotly.js-dist-min" {
  import Plotly from "plotly.js";
  export = Plotly;
}
