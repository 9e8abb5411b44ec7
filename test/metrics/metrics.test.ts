/**
 * `GET /metrics` on a running app (gateway and worker in one process, as `jobgate start`), read
 * with a real Prometheus text parser: counters move with the work done, gauges with what is
 * open, the token guards the route, and two apps in one process count apart.
 */
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type RunningApp } from '../../src/app.js';
import { parseConfig } from '../../src/environment.js';
import { createLogger } from '../../src/log.js';
import { HandlerRegistry, UnrecoverableError } from '../../src/service/engine/delivery/handler-registry.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/engine.js';
import { scrape, type Scrape } from '../support/prometheus.js';

const TOKEN = 'metrics-token-0123456789abcdef';
const CRON_SECRET = 'metrics-cron-secret-0123456789abcdef';
let t: TestDb;
let app: RunningApp;
let key: string;
let base: string;

const gql = async (query: string, variables: Record<string, unknown> = {}) => {
  const res = await fetch(app.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as { data?: any; errors?: { extensions?: { code?: string } }[] };
};

beforeAll(async () => {
  t = await createTestDb();
  const handlers = new HandlerRegistry();
  handlers.register('metrics-ok', undefined, async () => {});
  handlers.register('metrics-fail', undefined, async () => {
    throw new UnrecoverableError('refused on purpose');
  });
  await t.service.registerEndpoint(t.actor, { name: 'm.ok', kind: 'HANDLER', handlerName: 'metrics-ok' });
  await t.service.registerEndpoint(t.actor, { name: 'm.fail', kind: 'HANDLER', handlerName: 'metrics-fail', maxAttempts: 1 });
  // A handler no worker registers: its executions are due and wait.
  await t.service.registerEndpoint(t.actor, { name: 'm.nobody', kind: 'HANDLER', handlerName: 'metrics-nobody' });
  const config = parseConfig({
    DATABASE_URL: t.url,
    PORT: '0',
    JOBGATE_LOG_LEVEL: 'silent',
    JOBGATE_METRICS_TOKEN: TOKEN,
    JOBGATE_CRON_SECRET: CRON_SECRET,
  });
  app = await startApp({ config, log: createLogger('silent'), roles: { gateway: true, worker: true }, handlers });
  base = new URL(app.url).origin;
  ({ key } = await t.service.bootstrapKey('default', 'ADMIN', 'metrics test'));
});

afterAll(async () => {
  await app?.stop();
  await t?.close();
});

describe('/metrics', () => {
  it('gives an error inside a subscription streamed over Server-Sent Events the request id', async () => {
    const adminActor = await t.service.authenticate(key);
    const { key: streamKey, apiKey } = await t.service.createApiKey(adminActor, { name: 'sse stream', role: 'VIEWER' });
    const res = await fetch(app.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        authorization: `Bearer ${streamKey}`,
        'x-request-id': 'sse-stream-1',
      },
      body: JSON.stringify({ query: 'subscription { executionUpdates { cursor } }' }),
    });
    expect(res.headers.get('x-request-id')).toBe('sse-stream-1');
    // The stream is open; revoking its key ends it with an error event (Invariant 10).
    await t.service.revokeApiKey(adminActor, apiKey.id);
    const text = await res.text();
    const event = JSON.parse(/^data: (\{"errors".+)$/m.exec(text)![1]!) as { errors: { extensions: Record<string, unknown> }[] };
    expect(event.errors[0]!.extensions).toMatchObject({ code: 'UNAUTHENTICATED', requestId: 'sse-stream-1' });
  });

  it('counts the serverless passes POST /jobs/run-due runs', async () => {
    const before = (await scrape(base, TOKEN)).value('jobgate_run_due_passes_total', { outcome: 'ok' });
    const res = await fetch(new URL('/jobs/run-due', base), { method: 'POST', headers: { authorization: `Bearer ${CRON_SECRET}` } });
    expect(res.status).toBe(200);
    const s = await scrape(base, TOKEN);
    expect(s.value('jobgate_run_due_passes_total', { outcome: 'ok' })).toBe(before + 1);
    expect(s.value('jobgate_http_requests_total', { route: '/jobs/run-due', code: '200' })).toBe(1);
  });

  it('is refused without the token, with a wrong one, and with a near miss; answers the text format with it', async () => {
    const url = new URL('/metrics', base);
    expect((await fetch(url)).status).toBe(401);
    expect((await fetch(url, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await fetch(url, { headers: { authorization: `Bearer ${TOKEN.slice(0, -1)}x` } })).status).toBe(401);
    expect((await fetch(url, { headers: { authorization: `Bearer ${TOKEN}x` } })).status).toBe(401);
    expect((await fetch(url, { headers: { authorization: TOKEN } })).status).toBe(401);
    // An API key is not the metrics token.
    const refused = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
    expect(refused.status).toBe(401);
    expect(await refused.text()).not.toContain('jobgate_');
    expect((await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(405);
    const s = await scrape(base, TOKEN);
    // Node's default process metrics, and the pool's.
    expect(s.family('process_cpu_user_seconds_total')?.type).toBe('COUNTER');
    expect(s.family('nodejs_eventloop_lag_seconds')?.type).toBe('GAUGE');
    expect(s.has('jobgate_db_pool_connections', { state: 'total' })).toBe(true);
    expect(s.has('jobgate_db_pool_waiting')).toBe(true);
  });

  it('counts executions finished by endpoint and outcome, attempts and start delays, as they happen', async () => {
    const before = await scrape(base, TOKEN);
    const N = 7;
    const jobs: string[] = [];
    for (let i = 0; i < N; i++) jobs.push((await t.service.createJob(t.actor, { endpointName: 'm.ok', kind: 'IMMEDIATE' })).job.id);
    const failed = (await t.service.createJob(t.actor, { endpointName: 'm.fail', kind: 'IMMEDIATE' })).job.id;
    await eventually(async () => {
      const { rows } = await t.query(
        `select count(*)::int as n from executions where job_id = any($1) and status in ('SUCCEEDED', 'FAILED')`,
        [[...jobs, failed]],
      );
      return rows[0].n === N + 1;
    });
    // Recorded means counted: the outcome's record and the counter move together, but read them until both are in.
    const after = await eventually(async () => {
      const s = await scrape(base, TOKEN);
      return s.value('jobgate_executions_finished_total', { endpoint: 'm.fail', outcome: 'FAILED' }) >= 1 &&
        s.value('jobgate_executions_finished_total', { endpoint: 'm.ok', outcome: 'SUCCEEDED' }) >= N
        ? s
        : undefined;
    });
    const delta = (name: string, labels: Record<string, string>, read: (s: Scrape) => number = (s) => s.value(name, labels)) =>
      read(after) - read(before);
    expect(delta('jobgate_executions_finished_total', { endpoint: 'm.ok', outcome: 'SUCCEEDED' })).toBe(N);
    expect(delta('jobgate_executions_finished_total', { endpoint: 'm.ok', outcome: 'FAILED' })).toBe(0);
    expect(delta('jobgate_executions_finished_total', { endpoint: 'm.fail', outcome: 'FAILED' })).toBe(1);
    expect(delta('jobgate_executions_finished_total', { endpoint: 'm.fail', outcome: 'SUCCEEDED' })).toBe(0);
    expect(delta('jobgate_attempts_total', { endpoint: 'm.ok', outcome: 'SUCCEEDED' })).toBe(N);
    expect(delta('jobgate_attempts_total', { endpoint: 'm.fail', outcome: 'FAILED' })).toBe(1);
    const histCount = (name: string, endpoint: string) => (s: Scrape) => s.count(name, { endpoint });
    expect(delta('', {}, histCount('jobgate_attempt_duration_seconds', 'm.ok'))).toBe(N);
    expect(delta('', {}, histCount('jobgate_execution_start_delay_seconds', 'm.ok'))).toBe(N);
    expect(after.family('jobgate_attempt_duration_seconds')?.type).toBe('HISTOGRAM');
    // No id is a label anywhere.
    for (const id of [...jobs, failed]) expect(after.text).not.toContain(id);
  });

  it('shows the queue per endpoint: pending, due but waiting, running', async () => {
    await t.service.createJob(t.actor, { endpointName: 'm.ok', kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000).toISOString() });
    await t.service.createJob(t.actor, { endpointName: 'm.nobody', kind: 'IMMEDIATE' });
    await t.service.createJob(t.actor, { endpointName: 'm.nobody', kind: 'IMMEDIATE' });
    // The gauges are read at most every 5 s: wait for a read that includes them.
    const s = await eventually(
      async () => {
        const got = await scrape(base, TOKEN);
        return got.value('jobgate_executions', { endpoint: 'm.nobody', state: 'pending' }) === 2 ? got : undefined;
      },
      15_000,
      'the queue gauges to show the new executions',
    );
    expect(s.value('jobgate_executions', { endpoint: 'm.nobody', state: 'due' })).toBe(2);
    expect(s.value('jobgate_executions', { endpoint: 'm.nobody', state: 'running' })).toBe(0);
    expect(s.value('jobgate_executions', { endpoint: 'm.ok', state: 'pending' })).toBe(1);
    expect(s.value('jobgate_executions', { endpoint: 'm.ok', state: 'due' })).toBe(0);
    for (const status of ['RUNNING', 'CANCEL_REQUESTED', 'PAUSED']) expect(s.has('jobgate_runs', { status })).toBe(true);
  });

  it('counts pending executions by the reason each waits, as their waitingFor says', async () => {
    const paused = await t.service.registerEndpoint(t.actor, { name: 'm.paused', kind: 'HANDLER', handlerName: 'metrics-ok' });
    await t.service.pauseEndpoint(t.actor, paused.id);
    await t.service.createJob(t.actor, { endpointName: 'm.paused', kind: 'IMMEDIATE' });
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const held = await t.service.createJob(t.actor, { endpointName: 'm.nobody', kind: 'DELAYED', runAt: later });
    await t.service.pauseJob(t.actor, held.job.id);
    const s = await eventually(
      async () => {
        const got = await scrape(base, TOKEN);
        return got.value('jobgate_executions_waiting', { endpoint: 'm.paused', reason: 'ENDPOINT_PAUSED' }) === 1 &&
          got.value('jobgate_executions_waiting', { endpoint: 'm.nobody', reason: 'JOB_PAUSED' }) === 1
          ? got
          : undefined;
      },
      15_000,
      'the waiting gauge to show the new executions',
    );
    // Every pending execution is counted once, under the reason the API gives it.
    const { data } = await gql(`{ executions(first: 100, status: PENDING) { nodes { job { endpoint { name } } waitingFor { reason } } } }`);
    // This test's endpoints only: the gauge counts an endpoint name across workspaces, and
    // jobgate's own cron jobs (written ahead of their time, NOT_DUE) exist in every workspace.
    const fromApi = new Map<string, number>();
    for (const n of data.executions.nodes) {
      if (!n.job.endpoint.name.startsWith('m.')) continue;
      const k = `${n.job.endpoint.name} ${n.waitingFor.reason}`;
      fromApi.set(k, (fromApi.get(k) ?? 0) + 1);
    }
    expect(fromApi.get('m.nobody NO_LIVE_WORKER')).toBeGreaterThanOrEqual(2);
    expect(fromApi.get('m.ok NOT_DUE')).toBeGreaterThanOrEqual(1);
    for (const [k, n] of fromApi) {
      const [endpoint, reason] = k.split(' ');
      expect(s.value('jobgate_executions_waiting', { endpoint: endpoint!, reason: reason! }), k).toBe(n);
    }
    // And nothing else of these endpoints: no series under a reason the API gives none of them.
    const series = s.family('jobgate_executions_waiting')!.metrics.filter((m) => m.labels!.endpoint!.startsWith('m.'));
    expect(
      series
        .filter((m) => Number(m.value) > 0)
        .map((m) => `${m.labels!.endpoint} ${m.labels!.reason}`)
        .sort(),
    ).toEqual([...fromApi.keys()].sort());
  });

  it('counts GraphQL operations by type and outcome, and HTTP requests by route', async () => {
    const before = await scrape(base, TOKEN);
    expect((await gql('{ workspace { slug } }')).data.workspace.slug).toBe('default');
    expect((await gql('query { job(id: "not-an-id") { id } }')).errors?.length).toBeGreaterThan(0);
    const m = await gql('mutation($id: ID!) { pauseJob(id: $id) { id } }', { id: '00000000-0000-0000-0000-000000000000' });
    expect(m.errors?.length).toBeGreaterThan(0);
    const after = await scrape(base, TOKEN);
    const d = (labels: Record<string, string>) =>
      after.value('jobgate_graphql_operations_total', labels) - before.value('jobgate_graphql_operations_total', labels);
    expect(d({ type: 'query', outcome: 'ok' })).toBe(1);
    expect(d({ type: 'query', outcome: 'error' })).toBe(1);
    expect(d({ type: 'mutation', outcome: 'error' })).toBe(1);
    expect(
      after.value('jobgate_http_requests_total', { route: '/graphql', code: '200' }) -
        before.value('jobgate_http_requests_total', { route: '/graphql', code: '200' }),
    ).toBe(3);
    // Scrapes are requests too: the one before this one is counted.
    expect(after.value('jobgate_http_requests_total', { route: '/metrics', code: '200' })).toBeGreaterThan(0);
  });

  it('shows live subscriptions opening and closing with a real graphql-ws client, and the events they get', async () => {
    const subscriptions = async () => (await scrape(base, TOKEN)).value('jobgate_live_subscriptions');
    const start = await subscriptions();
    const before = await scrape(base, TOKEN);
    const client: Client = createClient({
      url: app.url.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${key}` },
    });
    const got: unknown[] = [];
    const stop = client.subscribe(
      { query: 'subscription { executionUpdates { cursor status } }' },
      { next: (m) => void got.push(m), error: () => {}, complete: () => {} },
    );
    try {
      await eventually(async () => (await subscriptions()) === start + 1, 10_000, 'the subscription to be counted');
      await t.service.createJob(t.actor, { endpointName: 'm.ok', kind: 'IMMEDIATE' });
      await eventually(async () => got.length >= 1, 10_000, 'an event');
      const after = await scrape(base, TOKEN);
      expect(
        after.value('jobgate_live_events_delivered_total') - before.value('jobgate_live_events_delivered_total'),
      ).toBeGreaterThanOrEqual(got.length);
      expect(
        after.value('jobgate_graphql_operations_total', { type: 'subscription', outcome: 'ok' }) -
          before.value('jobgate_graphql_operations_total', { type: 'subscription', outcome: 'ok' }),
      ).toBe(1);
    } finally {
      stop();
      await client.dispose();
    }
    await eventually(async () => (await subscriptions()) === start, 10_000, 'the subscription to be gone');
  });

  it('keeps the registries of two apps in one process apart', async () => {
    const config = parseConfig({
      DATABASE_URL: t.url,
      PORT: '0',
      JOBGATE_LOG_LEVEL: 'silent',
      JOBGATE_METRICS_TOKEN: TOKEN,
      JOBGATE_CRON_SECRET: CRON_SECRET,
    });
    const second = await startApp({ config, log: createLogger('silent'), roles: { gateway: true, worker: false } });
    try {
      const s = await scrape(new URL(second.url).origin, TOKEN);
      // Only the first app's worker ran executions.
      expect(s.has('jobgate_executions_finished_total', { endpoint: 'm.ok' })).toBe(false);
      expect(
        (await scrape(base, TOKEN)).value('jobgate_executions_finished_total', { endpoint: 'm.ok', outcome: 'SUCCEEDED' }),
      ).toBeGreaterThan(0);
      // A gateway alone has no worker gauge.
      expect(s.has('jobgate_worker_attempts_in_flight')).toBe(false);
    } finally {
      await second.stop();
    }
  });

  it('is not there at all without a token (404), while the health routes are', async () => {
    const config = parseConfig({ DATABASE_URL: t.url, PORT: '0', JOBGATE_LOG_LEVEL: 'silent' });
    const bare = await startApp({ config, log: createLogger('silent'), roles: { gateway: true, worker: false } });
    try {
      const origin = new URL(bare.url).origin;
      expect((await fetch(new URL('/metrics', origin), { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
      expect((await fetch(new URL('/healthz', origin))).status).toBe(200);
    } finally {
      await bare.stop();
    }
  });
});
