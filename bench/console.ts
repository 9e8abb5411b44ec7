/**
 * The console: its size, how fast the overview shows data with 1,000,000 executions in the
 * database, and how fast an execution's change reaches the screen.
 *
 * - Size: the JavaScript and CSS the first screen loads, gzipped at level 9 as a server would
 *   send them: the files of the console's assets the browser fetched from navigation to the
 *   overview showing data, signed in (the shell's chunk and the overview's; each other screen is a
 *   chunk of its own, fetched when first shown). Also every chunk of every screen, for scale.
 * - Overview: a real jobgate gateway (in this process) on a database seeded with 1,000,000
 *   executions over the last 24 hours (98% SUCCEEDED, 2% FAILED, 0.5% CANCELLED) on 10
 *   endpoints, each with its attempt (an attempts row for those of the last hour); Debian's Chromium
 *   (headless) loads /console/ signed in, and the time runs from navigation to the overview's
 *   tiles on screen. Also the executionStats query alone, over HTTP.
 * - Commit-to-screen: with the overview open in one tab and the executions list in another, an
 *   execution's status is changed by an UPDATE (the same event and NOTIFY as the engine's); the
 *   time runs from its COMMIT returning to the new status being on the list's screen (a
 *   MutationObserver in the page; both clocks are this machine's wall clock).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { gzipSync } from 'node:zlib';
import pg from 'pg';
import { startApp } from '../src/app.js';
import { parseConfig } from '../src/environment.js';
import { createLogger } from '../src/log.js';
import { DEFAULT_CONSOLE_DIR } from '../src/server/console.js';
import { launchChromium } from '../test/support/console.js';
import type { Figure } from './run.js';
import { onCleanup } from './support/cleanup.js';
import { openServer } from './support/postgres.js';
import { execFileSync } from 'node:child_process';

const EXECUTIONS = Number(process.env.BENCH_CONSOLE_EXECUTIONS ?? 1_000_000);

function buildConsole(): void {
  if (!existsSync(join(DEFAULT_CONSOLE_DIR, 'index.html'))) execFileSync('npm', ['run', 'console:build'], { stdio: 'inherit' });
}

/** Gzipped bytes (level 9) of the console's files at these paths under /console/. */
function gzippedSize(paths: Iterable<string>): { js: number; css: number } {
  const size = { js: 0, css: 0 };
  for (const p of paths) {
    const bytes = gzipSync(readFileSync(join(DEFAULT_CONSOLE_DIR, p)), { level: 9 }).length;
    if (p.endsWith('.js')) size.js += bytes;
    else if (p.endsWith('.css')) size.css += bytes;
  }
  return size;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

export async function seed(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // Seeding only: no event rows, no foreign-key checks for the million rows (all valid by construction).
    await client.query(`set session_replication_role = replica`);
    await client.query(`
      insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, status, attempt_count, max_attempts, run_after, attempt_started_at, finished_at, created_at, updated_at, last_error, gated, job_held)
      select w.id, j.ids[1 + g % j.n], j.eps[1 + g % j.n], t, s, 1, 5, t, t + (random() * interval '300 ms'),
             case when s <> 'PENDING' then t + interval '800 ms' end, t, t,
             case when s = 'FAILED' then 'HTTP 500' end, false, false
      from (select id from workspaces where slug = 'default') w,
           (select array_agg(id order by id) as ids, array_agg(endpoint_id order by id) as eps, count(*)::int as n
              from jobs where workspace_id = (select id from workspaces where slug = 'default')) j,
           lateral (select g, now() - (g * interval '86.4 ms') as t,
                           case when g % 50 = 0 then 'FAILED' when g % 200 = 1 then 'CANCELLED' else 'SUCCEEDED' end as s
                      from generate_series(1, ${EXECUTIONS}) g) x`);
    await client.query(`
      insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, started_at, finished_at, outcome, duration_ms)
      select workspace_id, id, 1, 1, 'bench', scheduled_for + (random() * interval '300 ms'), finished_at,
             case when status = 'FAILED' then 'FAILED' else 'SUCCEEDED' end, 500
      from executions where scheduled_for > now() - interval '1 hour' and finished_at is not null`);
    await client.query(`set session_replication_role = origin`);
    // As autovacuum would soon: index-only scans need the visibility map.
    await client.query(`vacuum analyze executions`);
    await client.query(`vacuum analyze attempts`);
  } finally {
    await client.end();
  }
}

export async function run(): Promise<Figure[]> {
  const figures: Figure[] = [];
  buildConsole();
  const every = gzippedSize(readdirSync(join(DEFAULT_CONSOLE_DIR, 'assets')).map((f) => `assets/${f}`));
  figures.push({ bench: 'console', system: 'every screen JS (all chunks), gzipped', value: every.js / 1024, unit: 'KB' });

  const server = await openServer();
  const target = await server.createDatabase('jobgate_bench_console');
  const config = parseConfig({ DATABASE_URL: target.url, PORT: '0', HOST: '127.0.0.1', JOBGATE_LOG_LEVEL: 'silent' });
  const app = await startApp({ config, log: createLogger('silent'), roles: { gateway: true, worker: false } });
  const stopApp = onCleanup('console bench gateway', () => app.stop());
  const origin = new URL(app.url).origin;
  const db = new pg.Client({ connectionString: target.url });
  await db.connect();
  const browser = await launchChromium();
  const closeBrowser = onCleanup('console bench browser', () => browser.close());
  try {
    // Ten endpoints and a hundred jobs, through the API (the service), then the million rows.
    const { createDatabase } = await import('../src/db/pool.js');
    const { createJobService } = await import('../src/service/index.js');
    const database = createDatabase({ connectionString: target.url, max: 2 });
    const service = createJobService({ db: database.db, pool: database.pool, defaultMaxAttempts: 5 });
    const ws = (await db.query(`select id from workspaces where slug = 'default'`)).rows[0].id as string;
    const actor = { workspaceId: ws, kind: 'user' as const, role: 'ADMIN' as const };
    for (let e = 0; e < 10; e++)
      await service.registerEndpoint(actor, { name: `bench.endpoint-${e}`, kind: 'HANDLER', handlerName: 'bench' });
    for (let j = 0; j < 100; j++)
      await service.createJob(actor, {
        endpointName: `bench.endpoint-${j % 10}`,
        kind: 'DELAYED',
        runAt: new Date(Date.now() + 86_400_000),
        name: `bench-${j}`,
      });
    const { key } = await service.bootstrapKey('default', 'ADMIN', 'console bench');
    await database.close();
    const t0 = performance.now();
    await seed(target.url);
    const seeded = (await db.query(`select count(*)::int as n from executions`)).rows[0].n as number;
    figures.push({
      bench: 'console',
      system: `seed ${seeded.toLocaleString('en')} executions (not a figure of the console)`,
      value: (performance.now() - t0) / 1000,
      unit: 's',
    });

    // executionStats alone, over HTTP.
    const statsMs: number[] = [];
    for (let i = 0; i < 12; i++) {
      const s = performance.now();
      const res = await fetch(app.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({
          query: '{ executionStats { workersAlive byEndpoint { endpointId failed } perMinute { minute succeeded latencyP95Ms } } }',
        }),
      });
      const body = (await res.json()) as { errors?: unknown };
      if (body.errors) throw new Error(`executionStats failed: ${JSON.stringify(body.errors)}`);
      if (i >= 2) statsMs.push(performance.now() - s);
    }
    figures.push({
      bench: 'console',
      system: `executionStats, ${seeded.toLocaleString('en')} executions, p50`,
      value: pct(statsMs, 50),
      unit: 'ms',
    });

    // Navigation to the overview showing data; what it fetched of the console's files is the first screen.
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const overview = await context.newPage();
    const fetched = new Set<string>();
    overview.on('request', (r) => {
      const path = new URL(r.url()).pathname;
      if (path.startsWith('/console/assets/')) fetched.add(path.slice('/console/'.length));
    });
    await overview.goto(`${origin}/console/`);
    await overview.getByLabel('API key').fill(key);
    await overview.getByRole('button', { name: 'Sign in' }).click();
    await overview.getByTestId('overview-tiles').waitFor({ timeout: 60_000 });
    const first = gzippedSize(fetched);
    figures.push({
      bench: 'console',
      system: `first screen JS (${fetched.size} files with CSS), gzipped`,
      value: first.js / 1024,
      unit: 'KB',
    });
    figures.push({ bench: 'console', system: 'first screen CSS, gzipped', value: first.css / 1024, unit: 'KB' });
    const navMs: number[] = [];
    for (let i = 0; i < 6; i++) {
      const s = performance.now();
      await overview.goto(`${origin}/console/`);
      await overview.getByTestId('overview-tiles').waitFor({ timeout: 60_000 });
      await overview.getByTestId('by-endpoint').waitFor();
      navMs.push(performance.now() - s);
    }
    figures.push({ bench: 'console', system: 'navigation to overview with data, p50 of 6', value: pct(navMs, 50), unit: 'ms' });
    figures.push({ bench: 'console', system: 'navigation to overview with data, slowest of 6', value: Math.max(...navMs), unit: 'ms' });

    // Commit-to-screen: the overview open, and the executions list in a second tab.
    // sessionStorage is per tab: this one signs in too.
    const list = await context.newPage();
    await list.goto(`${origin}/console/executions`);
    await list.getByLabel('API key').fill(key);
    await list.getByRole('button', { name: 'Sign in' }).click();
    await list.getByTestId('executions').waitFor({ timeout: 60_000 });
    await list.getByTestId('live-state').getByText('Live').waitFor({ timeout: 20_000 });
    await overview.getByTestId('live-state').getByText('Live').waitFor({ timeout: 20_000 });
    const top = (await list.getByTestId('executions').locator('tbody tr').first().getAttribute('data-execution'))!;
    const id = (await db.query(`select id from executions where id::text = $1`, [top])).rows[0]?.id as string;
    if (!id) throw new Error('the first row names no execution');
    // A string, not a function: tsx's transform would add helpers the page does not have.
    await list.evaluate(`(() => {
      window.seen = [];
      const cell = () => document.querySelector('tr[data-execution="${id}"] .status');
      let last = cell()?.textContent;
      new MutationObserver(() => {
        const now = cell()?.textContent;
        if (now && now !== last) { last = now; window.seen.push({ status: now, at: Date.now() }); }
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    })()`);
    const latencies: number[] = [];
    const statuses = ['RUNNING', 'PENDING'];
    for (let i = 0; i < 40; i++) {
      const status = statuses[i % 2]!;
      const before = ((await list.evaluate('window.seen.length')) as number) ?? 0;
      await db.query(`update executions set status = $2 where id = $1`, [id, status]);
      const committed = Date.now();
      const deadline = committed + 10_000;
      for (;;) {
        const seen = (await list.evaluate('window.seen.slice()')) as { status: string; at: number }[];
        const hit = seen.slice(before).find((x) => x.status === status);
        if (hit) {
          latencies.push(hit.at - committed);
          break;
        }
        if (Date.now() > deadline) throw new Error(`status ${status} did not reach the screen within 10 s`);
        await new Promise((r) => setTimeout(r, 5));
      }
      await new Promise((r) => setTimeout(r, 150));
    }
    figures.push({ bench: 'console', system: 'commit-to-screen, execution update, p50 of 40', value: pct(latencies, 50), unit: 'ms' });
    figures.push({ bench: 'console', system: 'commit-to-screen, execution update, p95 of 40', value: pct(latencies, 95), unit: 'ms' });
    await context.close();
  } finally {
    await db.end();
    await closeBrowser();
    await stopApp();
    await target.drop();
    await server.close();
  }
  return figures;
}
