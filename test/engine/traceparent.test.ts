/**
 * HTTP deliveries carry W3C trace context: one trace per execution, the same across its retries,
 * a new span per attempt, sampled; against a real loopback target.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { attemptsOf, engineHarness, settled, type EngineHarness } from '../support/engine.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';

let t: TestDb;
let h: EngineHarness;
let target: HttpTarget;

beforeAll(async () => {
  t = await createTestDb();
  target = await startHttpTarget();
  h = engineHarness(t);
  await h.worker({ outboundAllow: ['127.0.0.0/8'], defaultTimeoutMs: 5000 });
});
afterAll(async () => {
  await h.stopAll();
  await target.close();
  await t.close();
});

// version 00, 16-byte trace id, 8-byte parent (span) id, flags; ids lowercase hex, not all zero.
const TRACEPARENT = /^00-(?!0{32})([0-9a-f]{32})-(?!0{16})([0-9a-f]{16})-([0-9a-f]{2})$/;

async function endpoint(name: string, path: string, extra: Record<string, unknown> = {}) {
  await t.service.registerEndpoint(t.actor, {
    name,
    kind: 'HTTP',
    url: `${target.url}${path}`,
    backoffBaseMs: 50,
    backoffMaxMs: 200,
    jitter: false,
    maxAttempts: 3,
    ...extra,
  });
}

describe('traceparent', () => {
  it("sends the execution's trace on every attempt, with a new span each time", async () => {
    await endpoint('trace.flaky', '/flaky');
    target.route('/flaky', (_req, res, n) => res.writeHead(n < 2 ? 503 : 200).end(n < 2 ? 'not yet' : 'ok'));
    const { job } = await t.service.createJob(t.actor, { endpointName: 'trace.flaky', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('SUCCEEDED');
    const hits = target.hitsOf('/flaky');
    expect(hits).toHaveLength(2);
    const parsed = hits.map((hit) => TRACEPARENT.exec(String(hit.headers.traceparent)));
    for (const m of parsed) expect(m, String(hits.map((x) => x.headers.traceparent))).not.toBeNull();
    const [first, second] = parsed as [RegExpExecArray, RegExpExecArray];
    expect(first[1]).toBe(second[1]); // one trace across the retries
    expect(first[2]).not.toBe(second[2]); // a span per attempt
    expect([first[3], second[3]]).toEqual(['01', '01']); // sampled
    // The trace id is the execution's id, so a trace found at the target leads to the execution.
    expect(first[1]).toBe(String(ex.id).replace(/-/g, ''));
    // Each attempt's record shows the header it sent.
    const attempts = await attemptsOf(t, ex.id);
    expect(attempts.map((a) => a.target.headers.traceparent)).toEqual(hits.map((x) => x.headers.traceparent));
  });

  it('starts a new trace for another execution of the same job', async () => {
    await endpoint('trace.ok', '/ok');
    target.route('/ok', (_req, res) => res.writeHead(200).end('ok'));
    const { job } = await t.service.createJob(t.actor, { endpointName: 'trace.ok', kind: 'IMMEDIATE' });
    await settled(t, job.id);
    await t.service.triggerJob(t.actor, { id: job.id, force: true });
    const hits = await (async () => {
      for (let i = 0; i < 400; i++) {
        if (target.hitsOf('/ok').length >= 2) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      return target.hitsOf('/ok');
    })();
    expect(hits).toHaveLength(2);
    const traces = hits.map((x) => TRACEPARENT.exec(String(x.headers.traceparent))![1]);
    expect(traces[0]).not.toBe(traces[1]);
  });

  it("keeps a traceparent the endpoint's own headers set", async () => {
    const own = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await endpoint('trace.own', '/own', { headers: { traceparent: own } });
    target.route('/own', (_req, res) => res.writeHead(200).end('ok'));
    const { job } = await t.service.createJob(t.actor, { endpointName: 'trace.own', kind: 'IMMEDIATE' });
    await settled(t, job.id);
    expect(target.hitsOf('/own')[0]!.headers.traceparent).toBe(own);
  });
});
