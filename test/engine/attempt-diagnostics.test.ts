/**
 * What an attempt records for diagnosing it: the worker's host and pid, a handler error's stack,
 * and the gap before the retry; a workspace's keys see the worker by digest only.
 */
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/service/kernel/actor.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, settled, type EngineHarness } from '../support/engine.js';

let t: TestDb;
let h: EngineHarness;

beforeAll(async () => {
  t = await createTestDb();
  h = engineHarness(t);
  let calls = 0;
  h.handle('diag.flaky', async () => {
    calls++;
    if (calls === 1) throwFromDeepInside();
  });
  await h.worker();
});
afterAll(async () => {
  await h.stopAll();
  await t.close();
});

function throwFromDeepInside(): never {
  throw new Error('ledger row 17 is locked');
}

describe('attempt diagnostics', () => {
  it("records the worker's host and pid, the handler's stack, and the gap before the retry", async () => {
    await t.service.registerEndpoint(t.actor, {
      name: 'diag.flaky',
      kind: 'HANDLER',
      handlerName: 'diag.flaky',
      backoffBaseMs: 300,
      backoffMaxMs: 300,
      jitter: false,
      maxAttempts: 3,
    });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'diag.flaky', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('SUCCEEDED');
    const installation: Actor = { workspaceId: t.actor.workspaceId, kind: 'system', role: 'ADMIN' };
    const [first, second] = await t.service.attempts(installation, ex.id);
    expect(first).toMatchObject({
      outcome: 'FAILED',
      error: 'Error: ledger row 17 is locked',
      workerHost: hostname(),
      workerPid: process.pid,
    });
    expect(first!.errorStack).toMatch(/^Error: ledger row 17 is locked\n\s+at throwFromDeepInside/);
    // The backoff (300 ms, no jitter) is the least the gap can be.
    expect(first!.gapBeforeNextMs).toBeGreaterThanOrEqual(300);
    expect(second).toMatchObject({ outcome: 'SUCCEEDED', errorStack: null, gapBeforeNextMs: null, workerPid: process.pid });

    const seenByWorkspace = await t.service.attempts(t.actor, ex.id);
    expect(seenByWorkspace[0]).toMatchObject({ workerHost: null, workerPid: null, errorStack: first!.errorStack });
    expect(seenByWorkspace[0]!.workerId).toMatch(/^worker-[0-9a-f]{12}$/);
  });
});
