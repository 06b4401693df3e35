import { defineConfig } from "@playwright/test";

// End-to-end tests drive Debian's Chromium (apt package `chromium`) against a running stack;
// scripts/test-frontend starts one and sets E2E_BASE_URL. Playwright's own browser downloads
// are never used.
const chromium = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export default defineConfig({
  testDir: "./e2e",
  fullyParallel: false,
  workers: 1,
  retries: 0,
  // generous: `make test` runs these beside pytest, Slurm and OpenStack on two cores, where a
  // page of a 100,000-run study or a field computed on request can take tens of seconds; how
  // fast they are is the benchmarks' business (bench/), not these tests'
  timeout: 300_000,
  expect: { timeout: 60_000 },
  reporter: [["list"]],
  outputDir: "test-results",
  use: {
    baseURL: process.env.E2E_BASE_URL ?? "http://127.0.0.1:8000",
    viewport: { width: 1440, height: 900 },
    locale: "en-GB",
    timezoneId: "Europe/Berlin",
    acceptDownloads: true,
    trace: "retain-on-failure",
    screenshot: "only-on-failure",
    launchOptions: {
      executablePath: chromium,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
  },
});
