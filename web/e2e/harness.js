// The browser tests' fixtures: a fresh database on the local Postgres, a
// real `switchyard serve` on it, headless Chromium, and an API client.
//
// Environment (make test-e2e sets the first two from scripts/services.sh):
//   SWITCHYARD_DATABASE_URL  the local Postgres (its database is only used
//                            to create and drop the test's own database)
//   SWITCHYARD_REDIS_URL     the local Redis (keys under a unique prefix)
//   SWITCHYARD_BIN           the binary to run (default: ../../bin/switchyard)
//   CHROMIUM                 the browser (default: /usr/bin/chromium)

import { spawn, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, mkdtempSync, rmSync, createWriteStream } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export const ADMIN_TOKEN = `e2e-admin-${randomBytes(12).toString("hex")}`;
export const READ_TOKEN = `e2e-reader-${randomBytes(12).toString("hex")}`;

function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the browser tests with make test-e2e`);
  return v;
}

// psql finds Postgres's client: on PATH, or the newest under Debian's
// /usr/lib/postgresql/*/bin.
function psql() {
  for (const dir of (process.env.PATH || "").split(":")) {
    if (dir && existsSync(path.join(dir, "psql"))) return path.join(dir, "psql");
  }
  const base = "/usr/lib/postgresql";
  const versions = existsSync(base) ? readdirSync(base).filter((v) => existsSync(path.join(base, v, "bin/psql"))) : [];
  versions.sort((a, b) => Number(b) - Number(a));
  if (!versions.length) throw new Error("psql not found (PATH, /usr/lib/postgresql/*/bin)");
  return path.join(base, versions[0], "bin/psql");
}

function withDatabase(url, db) {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

function sql(url, statement) {
  execFileSync(psql(), ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", statement], { stdio: ["ignore", "ignore", "inherit"] });
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export async function waitFor(what, fn, timeoutMs = 30000, intervalMs = 100) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last.message}` : ""}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

// startServer creates a database, migrates it and runs `switchyard serve
// --demo-handlers` on a free loopback port. stop() ends the server with
// SIGTERM, waits for it and drops the database.
export async function startServer() {
  const baseURL = required("SWITCHYARD_DATABASE_URL");
  const redisURL = required("SWITCHYARD_REDIS_URL");
  const bin = process.env.SWITCHYARD_BIN || path.join(repoRoot, "bin/switchyard");
  if (!existsSync(bin)) throw new Error(`${bin} not found: run make build (make test-e2e does)`);
  const suffix = `${process.pid}_${randomBytes(4).toString("hex")}`;
  const dbName = `switchyard_e2e_${suffix}`;
  const adminURL = withDatabase(baseURL, "postgres");
  sql(adminURL, `CREATE DATABASE ${dbName}`);
  const databaseURL = withDatabase(baseURL, dbName);
  const port = await freePort();
  const env = {
    ...process.env,
    SWITCHYARD_DATABASE_URL: databaseURL,
    SWITCHYARD_REDIS_URL: redisURL,
    SWITCHYARD_API_TOKENS: `e2e-admin:admin:${ADMIN_TOKEN},e2e-reader:read:${READ_TOKEN}`,
    SWITCHYARD_GUARD_KEY_PREFIX: `e2e-${suffix}:`,
  };
  execFileSync(bin, ["migrate", "up"], { env, stdio: ["ignore", "ignore", "inherit"] });
  const logDir = mkdtempSync(path.join(os.tmpdir(), "switchyard-e2e-"));
  const logPath = path.join(logDir, "serve.log");
  const log = createWriteStream(logPath);
  const child = spawn(bin, ["serve", "--demo-handlers", "--http-addr", `127.0.0.1:${port}`, "--queues", "default=10", "--heartbeat-interval", "2s"], {
    env, stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const url = `http://127.0.0.1:${port}`;
  let dead = null;
  exited.then((r) => (dead = r));
  await waitFor("switchyard serve to be ready", async () => {
    if (dead) throw new Error(`switchyard serve exited (${JSON.stringify(dead)}); log ${logPath}`);
    const res = await fetch(`${url}/readyz`);
    return res.ok;
  }, 60000, 200);
  return {
    url,
    logPath,
    async stop() {
      if (!dead) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 30000);
        await exited;
        clearTimeout(timer);
      }
      log.end();
      try {
        sql(adminURL, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      } catch (err) {
        console.error(`drop ${dbName}: ${err.message}`);
      }
      rmSync(logDir, { recursive: true, force: true });
    },
  };
}

// Chromium as the closed network needs it: no background traffic, no
// updates, no sign-in, no first-run UI. playwright-core gives every
// launch a fresh temporary profile (its own --user-data-dir).
export async function launchBrowser() {
  const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
  if (!existsSync(executablePath)) throw new Error(`${executablePath} not found: make test-e2e installs Debian's chromium`);
  return chromium.launch({
    executablePath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
  });
}

// client is a small API client for the tests' own requests.
export function client(url, token) {
  return async function api(method, p, body) {
    const res = await fetch(url + p, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body !== undefined ? { "Content-Type": "application/json" } : {}) },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
}
