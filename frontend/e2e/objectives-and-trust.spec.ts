/**
 * Objectives and trust flags on the real stack (PostgreSQL, Redis, Celery, the run agent and
 * icoFoam). Adding an objective to a finished study saves that objective and nothing else:
 * the dialog shows exactly that addition, the study's convergence and trust rules stay as
 * they were, and so does every run's trust flag. And a run whose averaged objective swings
 * (a cavity whose lid oscillates, e2e/fixtures/oscillating-lid) is flagged "Unsteady" with
 * its swing, in the runs table, its trust filter, on the run page and in results.csv.
 */
import { expect, test, type Locator, type Page } from "@playwright/test";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { csrfToken, signIn } from "./support";

const SHOTS = process.env.SCREENSHOT_DIR;
const SUFFIX = Date.now().toString(36);
const MEAN_SPEED = "meanSpeed.volAverage(mag(U))";

interface RunRow {
  id: string;
  index: number;
  state: string;
  trust: string;
  parameters: Record<string, number>;
  objectives: Record<string, number | null>;
  trust_detail: { oscillation?: Record<string, { amplitude: number; oscillating: boolean }> };
}

interface StudyDetail {
  spec: Record<string, unknown>;
  objectives: Record<string, unknown>;
  convergence: Record<string, unknown>;
}

async function createStudy(page: Page, spec: Record<string, unknown>): Promise<string> {
  const created = await page.request.post("/api/v1/studies/", {
    headers: { "X-CSRFToken": await csrfToken(page) },
    data: spec,
  });
  expect(created.status(), await created.text()).toBe(201);
  return ((await created.json()) as { id: string }).id;
}

async function studyRuns(page: Page, studyId: string): Promise<RunRow[]> {
  const r = await page.request.get(`/api/v1/studies/${studyId}/runs/`);
  expect(r.status()).toBe(200);
  return ((await r.json()) as { results: RunRow[] }).results;
}

/** Wait until every run of the study has completed (each a real icoFoam solve). */
async function runsCompleted(page: Page, studyId: string, count: number): Promise<RunRow[]> {
  await expect
    .poll(async () => (await studyRuns(page, studyId)).map((r) => r.state), {
      timeout: 200_000,
      intervals: [2_000],
      message: "every run completed",
    })
    .toEqual(Array<string>(count).fill("completed"));
  return studyRuns(page, studyId);
}

async function studyDetail(page: Page, studyId: string): Promise<StudyDetail> {
  const r = await page.request.get(`/api/v1/studies/${studyId}/`);
  expect(r.status()).toBe(200);
  return (await r.json()) as StudyDetail;
}

/** A study's spec without its objectives: what an objectives edit must leave alone. */
function withoutObjectives(spec: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(spec).filter(([key]) => key !== "objectives"));
}

/** The trust labels the runs table shows, by run index. */
async function trustLabels(page: Page, indexes: number[]): Promise<string[]> {
  const labels: string[] = [];
  for (const i of indexes) {
    const badge = page.getByTestId(`run-row-${i}`).locator("[data-trust]");
    await expect(badge).toBeVisible();
    labels.push((await badge.textContent()) ?? "");
  }
  return labels;
}

/** A runs-table row's cell under the column named `name`. */
async function cellUnder(page: Page, row: Locator, name: string): Promise<Locator> {
  const headers = page.getByTestId("runs-table").getByRole("columnheader");
  await expect
    .poll(() => headers.allTextContents(), { message: `a column for ${name}` })
    .toContain(name);
  return row.getByRole("cell").nth((await headers.allTextContents()).indexOf(name));
}

/** The swing a value shows after its "±". */
function swingOf(text: string): number {
  const m = /±\s*([\d.eE+-]+)/.exec(text);
  expect(m, `a swing (±) in "${text}"`).not.toBeNull();
  return Number(m![1]);
}

async function shot(page: Page, part: Locator | Page, name: string) {
  if (!SHOTS) return;
  await page.mouse.move(0, 0); // no tooltip or hover state in the picture
  await page.waitForTimeout(400);
  await part.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

test("adding an objective saves only that objective: trust rules and every run's trust flag stay", async ({
  page,
}) => {
  test.setTimeout(300_000);
  await signIn(page);
  // two tiny cavities; rules of its own for convergence and trust, which the edit must keep
  const studyId = await createStudy(page, {
    name: `E2E objectives edit ${SUFFIX}`,
    template: "cavity",
    parameters: { cells: { values: [10, 20] }, end_time: 0.2 },
    convergence: { diverge: { nan: true, courant_above: 4 } },
    trust: { oscillation_below: 0.05, window: 10 },
  });
  const runs = await runsCompleted(page, studyId, 2);
  const indexes = runs.map((r) => r.index).sort();
  const before = await studyDetail(page, studyId);
  const trustsBefore = runs.map((r) => [r.id, r.trust]);

  await page.goto(`/studies/${studyId}`);
  const labelsBefore = await trustLabels(page, indexes);
  expect(labelsBefore).toEqual(["Iteration limit", "Iteration limit"]);

  await page.getByTestId("edit-objectives").click();
  const dialog = page.getByRole("dialog", { name: "Edit objectives" });
  const diff = dialog.getByTestId("objectives-diff");
  await expect(diff).toContainText("No change yet");
  // the study's trust rule as it set it; the others empty (their defaults)
  await expect(dialog.getByLabel("oscillation below")).toHaveValue("0.05");
  await expect(dialog.getByLabel("residuals below")).toHaveValue("");

  await dialog.getByRole("button", { name: "Add objective" }).click();
  await dialog.getByLabel("Objective name").last().fill("speed_avg");
  const series = dialog.locator('input[aria-label="speed_avg series"]');
  await series.click();
  await page.getByRole("option", { name: MEAN_SPEED }).click();
  await expect(series).toHaveValue(MEAN_SPEED);

  // the diff: that one addition (a new objective averages its last 20 values), no trust rule
  const changes = dialog.getByTestId("objectives-change");
  await expect(changes).toHaveCount(1);
  await expect(changes).toHaveText(
    /^added\s*objective speed_avg:\s*mean_last of the last 20 of meanSpeed\.volAverage\(mag\(U\)\)$/,
  );
  await expect(diff).toContainText("Saving changes only this:");
  await expect(diff).not.toContainText(/trust/i);
  await shot(page, dialog, "objectives-diff");

  await page.getByTestId("save-objectives").click();
  await expect(dialog).toBeHidden();

  // the spec: the objective added, every other field as it was, byte for byte
  const after = await studyDetail(page, studyId);
  const added = { series: MEAN_SPEED, reduce: "mean_last", n: 20 };
  expect(after.objectives).toEqual({ ...before.objectives, speed_avg: added });
  expect(after.spec.objectives).toEqual({
    ...((before.spec.objectives as Record<string, unknown> | undefined) ?? before.objectives),
    speed_avg: added,
  });
  expect(JSON.stringify(after.spec.trust)).toBe(JSON.stringify(before.spec.trust));
  expect(JSON.stringify(after.spec.convergence)).toBe(JSON.stringify(before.spec.convergence));
  expect(JSON.stringify(after.convergence)).toBe(JSON.stringify(before.convergence));
  expect(JSON.stringify(withoutObjectives(after.spec))).toBe(
    JSON.stringify(withoutObjectives(before.spec)),
  );

  // every run recomputed with the new objective, its trust flag as before
  const recomputed = await studyRuns(page, studyId);
  expect(recomputed.map((r) => [r.id, r.trust])).toEqual(trustsBefore);
  for (const r of recomputed) expect(r.objectives.speed_avg).toBeGreaterThan(0);
  await page.reload();
  await expect(
    await cellUnder(page, page.getByTestId(`run-row-${indexes[0]}`), "speed_avg"),
  ).toHaveText(/^0\.\d+$/);
  expect(await trustLabels(page, indexes)).toEqual(labelsBefore);
});

test("a run whose averaged objective oscillates is flagged unsteady with its swing", async ({
  page,
}, testInfo) => {
  test.setTimeout(300_000);
  await signIn(page);
  // a 10 x 10 cavity whose lid speed swings at 5 Hz (lid_swing 0: a steady lid), 400 steps
  const archive = testInfo.outputPath("oscillating-lid.tar.gz");
  execFileSync("tar", [
    "-czf",
    archive,
    "-C",
    path.join(import.meta.dirname, "fixtures"),
    "oscillating-lid",
  ]);
  const upload = await page.request.post("/api/v1/uploads/", {
    headers: { "X-CSRFToken": await csrfToken(page) },
    multipart: {
      file: {
        name: "oscillating-lid.tar.gz",
        mimeType: "application/gzip",
        buffer: readFileSync(archive),
      },
    },
  });
  expect(upload.status(), await upload.text()).toBe(201);
  const caseId = ((await upload.json()) as { id: string }).id;
  const studyId = await createStudy(page, {
    name: `E2E unsteady lid ${SUFFIX}`,
    case: caseId,
    solver: "icoFoam",
    parameters: { lid_swing: { values: [0, 0.5] } },
    // the mean over the last two periods of the lid (40 steps each)
    objectives: { mean_speed: { series: MEAN_SPEED, reduce: "mean_last", n: 80 } },
  });

  const runs = await runsCompleted(page, studyId, 2);
  const swinging = runs.find((r) => r.parameters.lid_swing === 0.5)!;
  const steady = runs.find((r) => r.parameters.lid_swing === 0)!;
  expect(swinging.trust).toBe("unsteady");
  expect(steady.trust).toBe("iteration_limit");
  const swing = swinging.trust_detail.oscillation!.mean_speed!;
  expect(swing.oscillating).toBe(true);
  // the lid's ±50 % drives a swing of the mean speed well beyond the 2 % tolerance
  expect(swing.amplitude / swinging.objectives.mean_speed!).toBeGreaterThan(0.1);

  // the runs table: the flag, and the mean with its swing
  await page.goto(`/studies/${studyId}`);
  const unsteadyRow = page.getByTestId(`run-row-${swinging.index}`);
  const steadyRow = page.getByTestId(`run-row-${steady.index}`);
  await expect(unsteadyRow.locator("[data-trust]")).toHaveText("Unsteady");
  await expect(steadyRow.locator("[data-trust]")).toHaveText("Iteration limit");
  const value = await cellUnder(page, unsteadyRow, "mean_speed");
  await expect(value).toContainText("±");
  expect(swingOf((await value.textContent()) ?? "")).toBeCloseTo(swing.amplitude, 2);
  await expect(await cellUnder(page, steadyRow, "mean_speed")).not.toContainText("±");

  // the trust filter "Unsteady" finds it, and only it
  await page
    .getByRole("group", { name: "Filter runs by trust" })
    .getByText("Unsteady", { exact: true })
    .click();
  await expect(page).toHaveURL(/trust=unsteady/);
  await expect(page.getByTestId("runs-range")).toHaveText(/^1–1 of 1 runs/);
  await expect(unsteadyRow).toBeVisible();
  await expect(steadyRow).toHaveCount(0);

  // its page: the flag, the value with its swing, said to oscillate
  await page.goto(`/runs/${swinging.id}`);
  await expect(page.locator("[data-trust]").first()).toHaveText("Unsteady");
  const objective = page.getByTestId("objective-mean_speed");
  await expect(objective).toContainText("(oscillating)");
  expect(swingOf((await objective.textContent()) ?? "")).toBeCloseTo(swing.amplitude, 2);
  await shot(page, page, "run-unsteady");

  // results.csv: the flag and the swing in amplitude.mean_speed, empty for the steady run
  const csv = await page.request.get(`/api/v1/studies/${studyId}/results.csv`);
  expect(csv.status()).toBe(200);
  const [head, ...lines] = (await csv.text()).trim().split(/\r?\n/);
  const columns = head!.split(",");
  expect(columns).toContain("amplitude.mean_speed");
  const byRun = new Map(lines.map((l) => l.split(",")).map((v) => [v[columns.indexOf("run")], v]));
  const unsteadyLine = byRun.get(swinging.id)!;
  const steadyLine = byRun.get(steady.id)!;
  expect(unsteadyLine[columns.indexOf("trust")]).toBe("unsteady");
  expect(Number(unsteadyLine[columns.indexOf("amplitude.mean_speed")])).toBeCloseTo(
    swing.amplitude,
    6,
  );
  expect(steadyLine[columns.indexOf("trust")]).toBe("iteration_limit");
  expect(steadyLine[columns.indexOf("amplitude.mean_speed")]).toBe("");
});
