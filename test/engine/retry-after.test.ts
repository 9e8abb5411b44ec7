/**
 * A target's Retry-After slows its endpoint, not only the attempt that got it: after an HTTP 429
 * or 503 with Retry-After, no worker starts any of that endpoint's executions before the time it
 * names; other endpoints carry on; the waiting executions say why and until when; when the time
 * comes they start by themselves. Two workers and a real HTTP target on loopback.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, pauseOwnCronJobs, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';

let t: TestDb;
let h: EngineHarness;
let target: HttpTarget;
/** When each request reached the target (ms, this process's clock), by path. */
const arrivals = new Map<string, number[]>();

beforeAll(async () => {
  t = await createTestDb({}, { resettable: true });
  target = await startHttpTarget();
});
beforeEach(async () => {
  await t.reset();
  await pauseOwnCronJobs(t);
  arrivals.clear();
  h = engineHarness(t);
});
afterEach(() => h.stopAll());
afterAll(async () => {
  await target.close();
  await t?.close();
});

const RETRY_AFTER_S = 3;

/** `path` answers its first request `status` with Retry-After, every later one 200. */
function routeLimited(path: string, status: 429 | 503) {
  target.route(path, (_req, res, n) => {
    arrivals.set(path, [...(arrivals.get(path) ?? []), performance.now()]);
    if (n === 1) res.writeHead(status, { 'retry-after': String(RETRY_AFTER_S) }).end('slow down');
    else res.writeHead(200).end('ok');
  });
}

async function twoWorkers() {
  for (const workerId of ['ra-1', 'ra-2'])
    await h.worker({ workerId, concurrency: 5, outboundAllow: ['127.0.0.0/8'], defaultTimeoutMs: 5000 });
}

const httpEndpoint = (name: string, path: string, more: { concurrencyLimit?: number } = {}) =>
  t.service.registerEndpoint(t.actor, {
    name,
    kind: 'HTTP',
    url: `${target.url}${path}`,
    maxAttempts: 3,
    backoffBaseMs: 50,
    jitter: false,
    ...more,
  });
const immediate = async (endpointName: string) => (await t.service.createJob(t.actor, { endpointName, kind: 'IMMEDIATE' })).job.id;
const executionOf = async (jobId: string) => (await t.service.executions(t.actor, { jobId })).edges[0]!.node;

describe("a target's Retry-After", () => {
  for (const [label, status, more] of [
    ['429 on an endpoint without limits', 429, {}],
    ['503 on an endpoint with a concurrency limit (the limited claim)', 503, { concurrencyLimit: 4 }],
  ] as const) {
    it(`holds every start of its endpoint until then, on every worker: ${label}`, async () => {
      const path = `/held-${status}`;
      routeLimited(path, status);
      target.route('/free', (_req, res) => res.writeHead(200).end('ok'));
      await httpEndpoint(`ra.held-${status}`, path, more);
      await httpEndpoint('ra.free', '/free');
      await twoWorkers();

      const first = await immediate(`ra.held-${status}`);
      await eventually(
        async () => (await executionOf(first)).attemptCount === 1 && (await executionOf(first)).status === 'PENDING',
        10_000,
        'the first attempt to be answered',
      );
      const firstAt = arrivals.get(path)![0]!;
      const rest = [await immediate(`ra.held-${status}`), await immediate(`ra.held-${status}`)];
      const free = await immediate('ra.free');

      // Another endpoint is not slowed.
      await settled(t, free, ['SUCCEEDED']);
      const waiting = await t.service.waitingFor(t.actor, (await executionOf(rest[0]!)).id);
      expect(waiting?.reason).toBe('ENDPOINT_RETRY_AFTER');
      expect(waiting?.detail).toContain(`answered ${status} with Retry-After`);
      // Until the target's time: the completion's clock plus its Retry-After.
      expect(waiting!.until!.getTime()).toBeGreaterThan(Date.now());
      expect(waiting!.until!.getTime() - Date.now()).toBeLessThanOrEqual(RETRY_AFTER_S * 1000);
      expect(arrivals.get(path)).toHaveLength(1);

      // When the time comes, all three start by themselves (the workers' due timers).
      for (const id of [first, ...rest]) await settled(t, id, ['SUCCEEDED'], 15_000);
      const later = arrivals.get(path)!.slice(1);
      expect(later).toHaveLength(3);
      // None before the target's time (a little less, for the clocks' rounding).
      for (const at of later) expect(at - firstAt).toBeGreaterThan(RETRY_AFTER_S * 1000 - 300);
    });
  }

  it('is lifted by resumeEndpoint, audited, at once', async () => {
    target.route('/long', (_req, res, n) => {
      arrivals.set('/long', [...(arrivals.get('/long') ?? []), performance.now()]);
      if (n === 1) res.writeHead(429, { 'retry-after': '3600' }).end();
      else res.writeHead(200).end('ok');
    });
    const ep = await httpEndpoint('ra.long', '/long');
    await twoWorkers();
    const first = await immediate('ra.long');
    await eventually(
      async () => (await executionOf(first)).attemptCount === 1 && (await executionOf(first)).status === 'PENDING',
      10_000,
      'the 429',
    );
    const second = await immediate('ra.long');
    expect((await t.service.waitingFor(t.actor, (await executionOf(second)).id))?.reason).toBe('ENDPOINT_RETRY_AFTER');
    // The endpoint says so too, over GraphQL, on its own and in a list (read together).
    const g = createTestGateway(t);
    const holdQuery = `query ($id: ID!) {
      endpoint(id: $id) { retryAfterHold { until statusCode } }
      endpoints(first: 100) { nodes { name retryAfterHold { statusCode } } }
    }`;
    try {
      const held = await g.gql(holdQuery, { id: ep.id });
      expect(held.errors).toBeUndefined();
      expect(held.data!.endpoint.retryAfterHold.statusCode).toBe(429);
      const until = new Date(held.data!.endpoint.retryAfterHold.until).getTime();
      expect(until - Date.now()).toBeGreaterThan(3_500_000);
      expect(until - Date.now()).toBeLessThanOrEqual(3_600_000);
      const listed = held.data!.endpoints.nodes as { name: string; retryAfterHold: { statusCode: number } | null }[];
      expect(listed.filter((n) => n.retryAfterHold !== null)).toEqual([{ name: 'ra.long', retryAfterHold: { statusCode: 429 } }]);
      const resumed = await t.service.resumeEndpoint(t.actor, ep.id);
      expect(resumed.pausedAt).toBeNull();
      const lifted = await g.gql(holdQuery, { id: ep.id });
      expect(lifted.data!.endpoint.retryAfterHold).toBeNull();
    } finally {
      await g.close();
    }
    await settled(t, second, ['SUCCEEDED']);
    // The first waits out its own retry time still: the hold was the endpoint's, the retry is its own.
    expect((await executionOf(first)).status).toBe('PENDING');
    const audit = await t.service.auditLog(t.actor, { targetId: ep.id });
    expect(audit.entries.map((e) => e.action)).toEqual(['endpoint.resume', 'endpoint.register']);
    // Nothing is held any more: resuming again changes nothing (and is audited, as every call).
    await t.service.resumeEndpoint(t.actor, ep.id);
    expect((await t.service.auditLog(t.actor, { targetId: ep.id })).entries).toHaveLength(3);
  });

  it('records the latest time asked for, and leaves the endpoint free once it has passed', async () => {
    routeLimited('/once', 429);
    const ep = await httpEndpoint('ra.once', '/once');
    await twoWorkers();
    const job = await immediate('ra.once');
    await settled(t, job, ['SUCCEEDED'], 15_000);
    const { rows } = await t.query<{ status_code: number; passed: boolean }>(
      `select status_code, until <= now() as passed from endpoint_retry_after where endpoint_id = $1`,
      [ep.id],
    );
    expect(rows).toEqual([{ status_code: 429, passed: true }]);
    // A past hold holds nothing: the next job starts at once.
    const next = await immediate('ra.once');
    await settled(t, next, ['SUCCEEDED'], 3_000);
  });
});
