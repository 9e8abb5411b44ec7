/**
 * The console's end-to-end world: a real jobgate process (gateway and worker, startApp) on the test
 * database, with a few handlers to drive, and headless Chromium (Debian's `chromium` package,
 * driven by playwright-core; never a downloaded browser build).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startApp, type RunningApp } from '../../src/app.js';
import { parseConfig } from '../../src/environment.js';
import { createLogger } from '../../src/log.js';
import { CONSOLE_DOCUMENTS, DEFAULT_CONSOLE_DIR } from '../../src/server/console.js';
import { HandlerRegistry, UnrecoverableError } from '../../src/service/engine/delivery/handler-registry.js';
import { IntervalRegistry } from '../../src/service/engine/intervals/intervals.js';
import { outcome, RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';

export const CHROMIUM = process.env.JOBGATE_CHROMIUM ?? '/usr/bin/chromium';
export const ARTIFACTS = resolve('test-artifacts');

/**
 * Builds the console when its build is missing (a fresh clone whose install skipped scripts), or
 * is older than its manifest of persisted documents.
 */
export function ensureConsoleBuilt(): void {
  if (existsSync(join(DEFAULT_CONSOLE_DIR, 'index.html')) && existsSync(join(DEFAULT_CONSOLE_DIR, CONSOLE_DOCUMENTS))) return;
  // NODE_ENV=test (vitest's) would build React's development mode, not the console users get.
  execFileSync('npm', ['run', 'console:build'], { stdio: 'inherit', env: { ...process.env, NODE_ENV: 'production' } });
}

/**
 * What a request or WebSocket frame the console sent asks for: its text with the documents of the
 * hashes in it appended (the console names its documents by hash alone; the build's manifest has them).
 */
export function withDocuments(sent: string): string {
  const manifest = JSON.parse(readFileSync(join(DEFAULT_CONSOLE_DIR, CONSOLE_DOCUMENTS), 'utf8')) as Record<string, string>;
  const hashes = [...sent.matchAll(/"sha256Hash":"([0-9a-f]{64})"/g)].map((m) => m[1]!);
  return [sent, ...hashes.map((h) => manifest[h] ?? `<unknown hash ${h}>`)].join('\n');
}

export interface ConsoleWorld {
  app: RunningApp;
  /** http://127.0.0.1:<port> */
  origin: string;
  /** While false, the `console.flaky` handler fails every attempt (unrecoverably). */
  flakyHealthy: { value: boolean };
  /** Batches the `console.scan` run may still take; it waits at 0 until given more. */
  scanBudget: { value: number };
  /** While false, the `console.gated` handler holds its attempt (until aborted); true lets each succeed. */
  gateOpen: { value: boolean };
  stop(): Promise<void>;
}

export async function startConsoleWorld(databaseUrl: string): Promise<ConsoleWorld> {
  const flakyHealthy = { value: false };
  const scanBudget = { value: 0 };
  const gateOpen = { value: false };
  const handlers = new HandlerRegistry();
  handlers.register('console.ok', undefined, () => ({ ok: true }));
  handlers.register('console.flaky', undefined, () => {
    if (!flakyHealthy.value) throw new UnrecoverableError('the flaky handler is down');
    return { ok: true };
  });
  handlers.register('console.gated', undefined, async (_input, ctx) => {
    while (!gateOpen.value && !ctx.signal.aborted) await new Promise((r) => setTimeout(r, 25));
    if (ctx.signal.aborted) throw new UnrecoverableError('the gated attempt was aborted');
    return { ok: true };
  });
  const recoverables = new RecoverableRegistry();
  recoverables.register({
    name: 'console.scan',
    async run(store) {
      const total = 20;
      let next = ((await store.loadCursor()) as { next: number } | null)?.next ?? 0;
      while (next < total) {
        if ((await store.status()) === 'CANCEL_REQUESTED') return outcome.paused({ next });
        if (scanBudget.value <= 0) {
          await new Promise((r) => setTimeout(r, 50));
          continue;
        }
        scanBudget.value--;
        for (const i of [next, next + 1]) {
          if (i % 3 === 0)
            await store.recordFinding({
              kind: i % 2 === 0 ? 'orphan' : 'stale',
              severity: i % 2 === 0 ? 'WARNING' : 'ERROR',
              resourceId: `r-${i}`,
              detail: { i },
            });
        }
        next += 2;
        await store.checkpoint({ next }, { processed: 2, total, stats: { scanned: 2 } });
      }
      return outcome.completed();
    },
  });
  const config = parseConfig({
    DATABASE_URL: databaseUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    JOBGATE_LOG_LEVEL: 'silent',
    JOBGATE_HEARTBEAT_MS: '1000',
    // Long enough that a held attempt (console.gated) keeps its lease through the stalls of a
    // loaded machine: with 3 s, CI saw a Batch screen's held members lose their leases and fail
    // before the screen was read. No console test waits for a lease to expire.
    JOBGATE_LEASE_MS: '15000',
    // The console sends its documents by hash alone: with only trusted documents allowed, any
    // request it sent as text would fail its screen.
    JOBGATE_PERSISTED_ONLY: 'on',
    // HTTP endpoints of the tests target servers on loopback (test/support/http-target.ts).
    JOBGATE_OUTBOUND_ALLOW: '127.0.0.0/8',
  });
  const app = await startApp({
    config,
    log: createLogger('silent'),
    roles: { gateway: true, worker: true },
    handlers,
    recoverables,
    intervals: new IntervalRegistry(),
  });
  const origin = new URL(app.url).origin;
  return { app, origin, flakyHealthy, scanBudget, gateOpen, stop: () => app.stop() };
}

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

/**
 * Debian's Chromium, headless. playwright-core gives each launch a fresh, temporary
 * --user-data-dir of its own (removed when the browser closes).
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: install Debian's package (apt-get install -y chromium)`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}

/** Saves a screenshot of `page` under test-artifacts/ (git-ignored); returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name.replace(/[^A-Za-z0-9_.-]+/g, '-')}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** Signs `page` in to the console at `origin` with `key`, and waits until it shows the key's role. */
export async function signIn(page: Page, origin: string, key: string): Promise<void> {
  await page.goto(`${origin}/console/`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('role').waitFor();
}

/** What axe finds serious or critical on `page` as shown, each line naming `view`. */
export async function seriousViolations(page: Page, view: string): Promise<string[]> {
  const result = await new AxeBuilder({ page }).analyze();
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${view}: ${v.id} (${v.impact}) ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}
