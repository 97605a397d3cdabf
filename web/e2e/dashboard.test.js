// Browser tests of the dashboard: a real headless Chromium against a real
// `switchyard serve` (fresh database, demo handlers). They also take the
// README's screenshots, docs/dashboard-overview.png and
// docs/dashboard-workflow.png. Run with `make test-e2e`.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { startServer, launchBrowser, client, waitFor, repoRoot, ADMIN_TOKEN, READ_TOKEN } from "./harness.js";

const VIEWPORT = { width: 1440, height: 900 };
const TIMEOUT = 30000;

let server;
let browser;
let admin; // API client with the admin token
let page; // the admin's page, signed in once
let loadStop = false;
let loadDone;

before(async () => {
  server = await startServer();
  admin = client(server.url, ADMIN_TOKEN);
  browser = await launchBrowser();
  page = await newPage();
  await signIn(page, ADMIN_TOKEN);
  // Background traffic while the tests run, so the overview's chart and
  // queues have something to show: a mix that completes, sleeps, retries
  // and fails (HTTP calls go to a closed loopback port).
  loadDone = generateLoad();
}, { timeout: 120000 });

after(async () => {
  loadStop = true;
  await loadDone?.catch(() => {});
  await browser?.close();
  await server?.stop();
});

async function newPage() {
  const context = await browser.newContext({ viewport: VIEWPORT, deviceScaleFactor: 1 });
  const p = await context.newPage();
  p.setDefaultTimeout(TIMEOUT);
  p.on("pageerror", (err) => console.error(`page error: ${err.message}`));
  p.on("console", (msg) => msg.type() === "error" && console.error(`console: ${msg.text()}`));
  return p;
}

async function signIn(p, token) {
  await p.goto(server.url + "/");
  await p.locator("input#token").fill(token);
  await p.getByRole("button", { name: "Sign in" }).click();
  await p.locator(".topbar .whoami").waitFor();
  await p.locator('.live[data-status="live"]').waitFor();
}

async function go(p, hash) {
  await p.evaluate((h) => {
    location.hash = h;
  }, hash);
}

async function generateLoad() {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  for (let round = 0; !loadStop && round < 120; round++) {
    const tasks = [];
    const n = 4 + ((round * 7) % 9);
    for (let i = 0; i < n; i++) tasks.push({ type: "noop", tags: ["load"] });
    tasks.push({ type: "sleep", args: { duration: `${1 + (round % 3)}s` }, tags: ["load"] });
    if (round % 2 === 0) tasks.push({ type: "sleep", args: { duration: "1s" }, delay: "20s", tags: ["load"] });
    if (round % 3 === 0) {
      tasks.push({ type: "http.request", args: { url: "http://127.0.0.1:9/unreachable", timeout: "1s" }, max_attempts: 3, tags: ["load"] });
    }
    try {
      await admin("POST", "/v1/tasks/batch", { tasks });
    } catch (err) {
      if (!loadStop) console.error(`load: ${err.message}`);
    }
    await sleep(900);
  }
}

// noReloadMarker leaves a value in the page's JavaScript state; it is gone
// if the page is reloaded, so a check that it survived proves an update
// came live.
async function setMarker(p) {
  await p.evaluate(() => {
    window.__e2eMarker = "still-here";
  });
}

async function assertNoReload(p) {
  assert.equal(await p.evaluate(() => window.__e2eMarker), "still-here", "the page was reloaded");
}

test("the overview lists queues and pods", async () => {
  await go(page, "#/");
  await page.locator('tr[data-queue="default"]').waitFor();
  await page.locator('tr[data-queue="workflow"]').waitFor();
  const pods = page.locator("tr[data-pod]");
  await pods.first().waitFor();
  assert.equal(await pods.count(), 1);
  const podText = await pods.first().innerText();
  assert.match(podText, /default/);
  assert.match(podText, /\/10/, "the pod's executor size for default");
  // Depth columns exist for every unfinished state.
  for (const st of ["waiting", "scheduled", "queued", "in_progress", "retrying"]) {
    assert.equal(await page.locator(`tr[data-queue="default"] td[data-depth="${st}"]`).count(), 1, st);
  }
  // Admins see the queue actions.
  assert.ok(await page.locator('tr[data-queue="default"] .action[data-action="pause-queue"]').count() > 0);
});

test("a task enqueued through the API appears live and is cancelled from the page", async () => {
  await go(page, "#/tasks?tag=e2e-cancel");
  await page.locator(".pager").waitFor();
  await setMarker(page);
  const task = await admin("POST", "/v1/tasks", { type: "sleep", args: { duration: "1s" }, delay: "1h", tags: ["e2e-cancel"] });
  const row = page.locator(`tr[data-task="${task.id}"]`);
  await row.waitFor();
  assert.equal(await row.getAttribute("data-state"), "scheduled");
  const cancel = row.locator('.action[data-action="cancel"]');
  await cancel.click();
  await row.getByRole("button", { name: "Confirm cancel" }).click();
  await page.locator(`tr[data-task="${task.id}"][data-state="cancelled"]`).waitFor();
  await assertNoReload(page);
  const after = await admin("GET", `/v1/tasks/${task.id}`);
  assert.equal(after.state, "cancelled");
  // The task page shows it, with a retry button now.
  await page.locator(`tr[data-task="${task.id}"] a[href="#/tasks/${task.id}"]`).click();
  await page.locator(`.page-header[data-task="${task.id}"][data-state="cancelled"]`).waitFor();
  assert.equal(await page.locator('.page-header .action[data-action="retry"]').count(), 1);
  assert.equal(await page.locator('.page-header .action[data-action="cancel"]').count(), 0);
});


test("a workflow's DAG renders and a step changes live when it completes", async () => {
  const def = JSON.parse(readFileSync(path.join(repoRoot, "demo/deploy-model.json"), "utf8"));
  const edges = def.steps.reduce((n, st) => n + (st.depends_on || []).length, 0);
  const exec = await admin("POST", "/v1/workflows", def);
  await go(page, `#/executions/${exec.id}`);
  const nodes = page.locator("svg.dag g.node");
  await nodes.first().waitFor();
  assert.equal(await nodes.count(), def.steps.length, "one node per step");
  assert.equal(await page.locator("svg.dag path.edge").count(), edges, "one edge per depends_on entry");
  for (const st of def.steps) {
    for (const dep of st.depends_on || []) {
      assert.equal(await page.locator(`svg.dag path.edge[data-from="${dep}"][data-to="${st.key}"]`).count(), 1, `${dep} → ${st.key}`);
    }
  }
  // Dependencies are drawn left of their dependents.
  const x = async (key) => (await page.locator(`g.node[data-step="${key}"]`).boundingBox()).x;
  assert.ok((await x("download")) < (await x("start-container")));
  assert.ok((await x("start-container")) < (await x("approve")));

  await setMarker(page);
  // The first step runs (visible as running), then the wait is reached.
  await page.locator('g.node[data-step="download"].status-running, g.node[data-step="download"].status-completed').waitFor();
  const approve = page.locator('g.node[data-step="approve"]');
  await page.locator('g.node[data-step="approve"].status-waiting').waitFor({ timeout: 60000 });
  assert.match(await page.locator('g.node[data-step="download"]').getAttribute("class"), /status-completed/);
  // The signal form offers the signal the wait expects.
  assert.equal(await page.locator('.signal-form input[name="signal"]').inputValue(), "approval");
  await page.locator('g.node[data-step="start-container"]').click();
  await page.locator('.step-detail[data-step="start-container"]').waitFor();
  await page.locator(".timeline li").nth(5).waitFor();
  await page.waitForTimeout(400); // let the pulse and layout settle for the picture
  await page.screenshot({ path: path.join(repoRoot, "docs/dashboard-workflow.png"), fullPage: false });

  // Signal through the API: the node turns completed without a reload.
  await admin("POST", `/v1/executions/${exec.id}/signals/approval`, { payload: { by: "e2e" } });
  await page.locator('g.node[data-step="approve"].status-completed').waitFor();
  assert.match(await approve.getAttribute("class"), /status-completed/);
  await page.locator('g.node[data-step="settle"].status-waiting, g.node[data-step="settle"].status-completed').waitFor();
  await assertNoReload(page);
  // The history shows the signal.
  await page.locator('.timeline li[data-event="signal_received"]').waitFor();
  // And the run completes (notify is optional and fails by design).
  await page.locator('.page-header[data-status="completed"]').waitFor({ timeout: 60000 });
  assert.match(await page.locator('g.node[data-step="notify"]').getAttribute("class"), /status-failed/);
  await assertNoReload(page);
});

test("a read-only token sees no action buttons; an admin acts on an execution", async () => {
  const task = await admin("POST", "/v1/tasks", { type: "sleep", args: { duration: "1s" }, delay: "1h", tags: ["e2e-readonly"] });
  const exec = await admin("POST", "/v1/workflows", {
    name: "read-only-check",
    steps: [{ key: "hold", wait: { signal: "go", timeout: "10m" } }, { key: "after", depends_on: ["hold"], task: { type: "noop" } }],
  });
  const reader = await newPage();
  await signIn(reader, READ_TOKEN);
  assert.equal(await reader.locator(".whoami .scope").textContent(), "read");
  const pages = [
    ["#/", 'tr[data-queue="default"]'],
    ["#/tasks?tag=e2e-readonly", `tr[data-task="${task.id}"]`],
    [`#/tasks/${task.id}`, `.page-header[data-task="${task.id}"]`],
    ["#/workflows", `tr[data-execution="${exec.id}"]`],
    [`#/executions/${exec.id}`, 'g.node[data-step="hold"].status-waiting'],
  ];
  for (const [hash, ready] of pages) {
    await go(reader, hash);
    await reader.locator(ready).waitFor();
    assert.equal(await reader.locator(".action").count(), 0, `${hash}: action buttons for a read token`);
    assert.equal(await reader.locator("button", { hasText: /^(Cancel|Retry|Pause|Resume|Send signal)$/ }).count(), 0, hash);
  }
  assert.equal(await reader.locator(".signal-form").count(), 0);
  // The same pages show the actions to the admin.
  await go(page, `#/executions/${exec.id}`);
  await page.locator('g.node[data-step="hold"].status-waiting').waitFor();
  for (const action of ["pause", "cancel", "signal"]) {
    assert.equal(await page.locator(`.action[data-action="${action}"]`).count(), 1, action);
  }
  // Pause, resume and cancel it from the page; the armed "Confirm cancel"
  // survives the header's clock ticking.
  await page.locator('.page-header .action[data-action="pause"]').click();
  await page.locator('.page-header[data-status="paused"]').waitFor();
  await page.locator('.page-header .action[data-action="resume"]').click();
  await page.locator('.page-header[data-status="running"]').waitFor();
  await page.locator('.page-header .action[data-action="cancel"]').click();
  await page.waitForTimeout(1500);
  await page.locator(".page-header").getByRole("button", { name: "Confirm cancel" }).click();
  await page.locator('.page-header[data-status="cancelled"]').waitFor();
  assert.equal((await admin("GET", `/v1/executions/${exec.id}`)).status, "cancelled");
  assert.equal(await page.locator(".signal-form").count(), 0, "no signal form on a finished execution");
  await go(page, `#/tasks/${task.id}`);
  await page.locator('.page-header .action[data-action="cancel"]').waitFor();
  await reader.context().close();
});

test("the overview shows throughput, failures and saturation live", async () => {
  await go(page, "#/");
  await page.locator('tr[data-queue="default"]').waitFor();
  // The chart fills from the event stream while the load runs.
  await waitFor("bars in the outcome chart", async () => (await page.locator("svg.chart rect.bar-completed").count()) >= 8, 60000, 250);
  await waitFor("a retried or failed task in the chart", async () => (await page.locator("svg.chart rect.bar-retried, svg.chart rect.bar-failed").count()) > 0, 60000, 250);
  const throughput = await page.locator('.stat[data-stat="Throughput"] .stat-value').innerText();
  assert.match(throughput, /^\d+\.\d\/s$/);
  assert.notEqual(throughput, "0.0/s");
  await waitFor("queued or scheduled tasks in the queues table", async () => {
    const n = await page.locator('tr[data-queue="default"] td[data-depth="scheduled"]').innerText();
    return Number(n) > 0;
  }, 30000, 250);
  await page.waitForTimeout(300);
  await page.screenshot({ path: path.join(repoRoot, "docs/dashboard-overview.png"), fullPage: true });
});
