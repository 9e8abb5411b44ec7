/**
 * `/healthz` and `/readyz`: up means answering; ready means the database answers, its migrations
 * are this version's, the LISTEN connections hear notifications, and the process is not shutting
 * down. A stopping process turns not-ready first. `jobgate worker` serves them, and /metrics, on a
 * port of its own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startApp, type RunningApp } from '../../src/app.js';
import { parseConfig } from '../../src/environment.js';
import { createLogger } from '../../src/log.js';
import { adminQuery, createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';
import { scrape } from '../support/prometheus.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const TOKEN = 'health-test-token-0123456789';
let t: TestDb;
let app: RunningApp | undefined;

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
});
beforeEach(async () => {
  await t.reset();
});
afterEach(async () => {
  await app?.stop();
  app = undefined;
  await adminQuery(`alter database ${t.name} allow_connections true`).catch(() => {});
});
afterAll(() => t?.close());

async function probe(base: string, route: '/healthz' | '/readyz') {
  const res = await fetch(new URL(route, base));
  const text = await res.text();
  return { status: res.status, text, body: JSON.parse(text) as { status: string; reasons?: string[] } };
}

const start = (env: Record<string, string> = {}) =>
  startApp({ config: parseConfig({ DATABASE_URL: t.url, PORT: '0', JOBGATE_LOG_LEVEL: 'silent', ...env }), log: createLogger('silent') });

describe('/healthz and /readyz on the gateway', () => {
  it('are open to anyone, 200 when all is well', async () => {
    app = await start();
    const base = new URL(app.url).origin;
    expect(await probe(base, '/healthz')).toMatchObject({ status: 200, body: { status: 'up' } });
    const ready = await eventually(async () => {
      const p = await probe(base, '/readyz');
      return p.status === 200 ? p : undefined;
    });
    expect(ready.body).toEqual({ status: 'ready' });
    expect((await fetch(new URL('/readyz', base), { method: 'POST' })).status).toBe(405);
  });

  it('/readyz is 503 while migrations are pending, and ready again once they are not', async () => {
    app = await start();
    const base = new URL(app.url).origin;
    await eventually(async () => (await probe(base, '/readyz')).status === 200);
    const { rows } = await t.query(
      'delete from jobgate_migrations where version = (select max(version) from jobgate_migrations) returning *',
    );
    const notReady = await eventually(async () => {
      const p = await probe(base, '/readyz');
      return p.status === 503 ? p : undefined;
    });
    expect(notReady.body).toEqual({ status: 'not ready', reasons: ['migrations pending'] });
    // /healthz is about the process, not its database.
    expect((await probe(base, '/healthz')).status).toBe(200);
    const row = rows[0];
    await t.query('insert into jobgate_migrations (version, name, checksum, applied_at) values ($1, $2, $3, $4)', [
      row.version,
      row.name,
      row.checksum,
      row.applied_at,
    ]);
    await eventually(async () => (await probe(base, '/readyz')).status === 200);
  });

  it('/readyz is 503 while the database refuses connections, saying nothing of it, and ready again when it is back', async () => {
    app = await start();
    const base = new URL(app.url).origin;
    await eventually(async () => (await probe(base, '/readyz')).status === 200);
    await adminQuery(`alter database ${t.name} allow_connections false`);
    await adminQuery(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [t.name]);
    const down = await eventually(
      async () => {
        const p = await probe(base, '/readyz');
        return p.status === 503 && p.body.reasons?.includes('database unreachable') ? p : undefined;
      },
      15_000,
      '/readyz to say the database is unreachable',
    );
    // Fixed phrases only: no database name, host, port or error text.
    expect(down.body.reasons).toEqual(expect.arrayContaining(['database unreachable']));
    for (const reason of down.body.reasons!)
      expect(['database unreachable', 'database not answering', 'worker listener not listening', 'live listener not listening']).toContain(
        reason,
      );
    for (const secret of [t.name, '127.0.0.1', '5432', 'postgres']) expect(down.text).not.toContain(secret);
    expect((await probe(base, '/healthz')).status).toBe(200);
    await adminQuery(`alter database ${t.name} allow_connections true`);
    await eventually(async () => (await probe(base, '/readyz')).status === 200, 20_000, '/readyz to be ready again');
  });

  it('turns 503 first when the process stops, and keeps answering for JOBGATE_SHUTDOWN_DELAY_MS', async () => {
    app = await start({ JOBGATE_SHUTDOWN_DELAY_MS: '5000' });
    const base = new URL(app.url).origin;
    await eventually(async () => (await probe(base, '/readyz')).status === 200);
    const stopping = app.stop();
    app = undefined;
    expect(await probe(base, '/readyz')).toMatchObject({ status: 503, body: { status: 'not ready', reasons: ['shutting down'] } });
    // Still up: it is draining, not dead.
    expect((await probe(base, '/healthz')).status).toBe(200);
    await stopping;
    await expect(fetch(new URL('/healthz', base))).rejects.toThrow();
  });
});

describe('jobgate worker', () => {
  let child: ChildProcess | undefined;
  let target: HttpTarget | undefined;
  afterEach(async () => {
    if (child && child.exitCode === null) {
      child.kill('SIGKILL');
      await new Promise((r) => child!.once('exit', r));
    }
    child = undefined;
    await target?.close();
    target = undefined;
  });

  it('serves /metrics, /healthz and /readyz on JOBGATE_METRICS_PORT, counts its executions, and turns not-ready before it drains', async () => {
    target = await startHttpTarget();
    target.route('/ok', (_req, res) => res.writeHead(200).end('ok'));
    await t.service.registerEndpoint(t.actor, { name: 'w.http', kind: 'HTTP', url: `${target.url}/ok` });
    let stderr = '';
    child = spawn(process.execPath, [path.join(ROOT, 'bin', 'jobgate.mjs'), 'worker'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: t.url,
        JOBGATE_LOG_LEVEL: 'info',
        // The test reads the metrics port's URL off a log line.
        JOBGATE_LOG_FORMAT: 'pretty',
        JOBGATE_METRICS_PORT: '0',
        JOBGATE_METRICS_TOKEN: TOKEN,
        JOBGATE_OUTBOUND_ALLOW: '127.0.0.0/8',
        JOBGATE_SHUTDOWN_DELAY_MS: '5000',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const base = await eventually(
      async () => /metrics: \/healthz, \/readyz and \/metrics at (http:\/\/\S+)/.exec(stderr)?.[1],
      30_000,
      'the worker to log its metrics address',
    );
    await eventually(async () => (await probe(base, '/readyz')).status === 200, 15_000, 'the worker to be ready');
    expect(await probe(base, '/healthz')).toMatchObject({ status: 200, body: { status: 'up' } });
    expect((await fetch(new URL('/metrics', base))).status).toBe(401);
    // Only the operator's routes on this port.
    expect((await fetch(new URL('/graphql', base))).status).toBe(404);

    const before = await scrape(base, TOKEN);
    expect(before.has('jobgate_worker_attempts_in_flight')).toBe(true);
    expect(before.has('jobgate_live_subscriptions')).toBe(false);
    const N = 3;
    for (let i = 0; i < N; i++) await t.service.createJob(t.actor, { endpointName: 'w.http', kind: 'IMMEDIATE' });
    const after = await eventually(
      async () => {
        const s = await scrape(base, TOKEN);
        return s.value('jobgate_executions_finished_total', { endpoint: 'w.http', outcome: 'SUCCEEDED' }) >= N ? s : undefined;
      },
      15_000,
      'the worker to count its executions',
    );
    expect(after.value('jobgate_executions_finished_total', { endpoint: 'w.http', outcome: 'SUCCEEDED' })).toBe(N);
    expect(after.count('jobgate_attempt_duration_seconds', { endpoint: 'w.http' })).toBe(N);
    expect(target.hitsOf('/ok')).toHaveLength(N);

    const exited = new Promise<number | null>((r) => child!.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    const stopping = await eventually(
      async () => {
        const p = await probe(base, '/readyz').catch(() => undefined);
        return p?.status === 503 ? p : undefined;
      },
      10_000,
      '/readyz to turn 503',
    );
    expect(stopping.body).toEqual({ status: 'not ready', reasons: ['shutting down'] });
    expect(await exited).toBe(0);
  });
});
