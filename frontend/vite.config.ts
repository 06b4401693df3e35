/// <reference types="vitest/config" />
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, URL } from "node:url";
import { brotliCompressSync, gzipSync, constants } from "node:zlib";
import react from "@vitejs/plugin-react";
import { defineConfig, type Plugin } from "vite";

// In development Vite serves the app and proxies the API to Django (make run / scripts/run).
const backend = process.env.WT_BACKEND ?? "http://127.0.0.1:8000";

/**
 * Plotly ships minified (4.8 MB): bundling it again costs most of the build's time for
 * nothing. The build copies plotly.min.js as a hashed asset and the app loads it with a
 * script tag on the first plot (src/components/plot.tsx); dev and tests import it normally.
 */
const plotlyFile = createRequire(import.meta.url).resolve("plotly.js-dist-min/plotly.min.js");
const plotlyBytes = readFileSync(plotlyFile);
const plotlyAsset = `assets/plotly-${createHash("sha256").update(plotlyBytes).digest("hex").slice(0, 12)}.min.js`;

function plotlyAsAsset(): Plugin {
  return {
    name: "windtunnel-plotly-asset",
    apply: "build",
    generateBundle() {
      this.emitFile({ type: "asset", fileName: plotlyAsset, source: plotlyBytes });
    },
  };
}

/**
 * Write .gz and .br next to the big assets once they are on disk (after every other plugin
 * has finished the code): WhiteNoise serves them to browsers that accept them.
 */
function precompress(): Plugin {
  let outDir = "dist";
  return {
    name: "windtunnel-precompress",
    apply: "build",
    configResolved(config) {
      outDir = path.resolve(config.root, config.build.outDir);
    },
    async writeBundle(_options, bundle) {
      await Promise.all(
        Object.keys(bundle)
          .filter((name) => /\.(js|css|svg|json)$/.test(name))
          .map(async (name) => {
            const file = path.join(outDir, name);
            const bytes = await readFile(file);
            if (bytes.length < 1024) return;
            await writeFile(`${file}.gz`, gzipSync(bytes, { level: 9 }));
            await writeFile(
              `${file}.br`,
              brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 6 } }),
            );
          }),
      );
    },
  };
}

export default defineConfig(({ command }) => ({
  // Django serves the build under STATIC_URL (/static/) through WhiteNoise.
  base: command === "build" ? "/static/" : "/",
  plugins: [react(), plotlyAsAsset(), precompress()],
  define: {
    __PLOTLY_URL__: JSON.stringify(command === "build" ? `/static/${plotlyAsset}` : ""),
  },
  resolve: {
    alias: {
      "@": fileURLToPath(new URL("./src", import.meta.url)),
      // the build loads Plotly from its own asset (above), never from the bundle
      ...(command === "build"
        ? {
            "plotly.js-dist-min": fileURLToPath(
              new URL("./src/lib/plotly-stub.ts", import.meta.url),
            ),
          }
        : {}),
    },
  },
  server: {
    port: 5173,
    strictPort: false,
    proxy: {
      // changeOrigin stays false: Django's CSRF check compares Origin with Host.
      "/api": { target: backend },
      "/api-auth": { target: backend },
      "/admin": { target: backend },
      "/static/admin": { target: backend },
      "/static/drf-yasg": { target: backend },
      "/static/drf_spectacular_sidecar": { target: backend },
      "/static/rest_framework": { target: backend },
      "/ws": { target: backend, ws: true },
    },
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    rollupOptions: {
      output: {
        manualChunks(id) {
          if (id.includes("node_modules/@mantine") || id.includes("node_modules/@tabler"))
            return "ui";
          if (id.includes("node_modules/react") || id.includes("node_modules/@tanstack"))
            return "react";
          return undefined;
        },
      },
    },
  },
  test: {
    environment: "jsdom",
    globals: true,
    setupFiles: ["./src/test/setup.ts"],
    include: ["src/**/*.test.{ts,tsx}"],
    css: false,
    pool: "threads",
    restoreMocks: true,
    testTimeout: 15000,
  },
}));
