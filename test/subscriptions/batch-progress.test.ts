/**
 * batchProgress: a batch's counts and state pushed live over graphql-ws, from the hint its row's
 * trigger sends (migration 000049) in the transaction that moves it: the batch at once, then each
 * member added or counted as it ends, the close and the completion, after which the stream
 * completes. Another workspace's batch is NOT_FOUND, and a revoked key ends the stream. Real
 * workers, a real gateway and hub, real Postgres.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, type EngineHarness } from '../support/engine.js';
import { QUIET, quietPeriod } from '../support/eventually.js';
import { collect, startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let live: LiveGateway;
let engine: EngineHarness;
let key: string;
let otherKey: string;

// Members wait for a permit from the test before they end, one at a time.
let permits = 0;
let waiting: (() => void)[] = [];
const allow = (n: number) => {
  permits += n;
  while (permits > 0 && waiting.length) {
    permits--;
    waiting.shift()!();
  }
};
const permit = () =>
  new Promise<void>((resolve) => {
    if (permits > 0) {
      permits--;
      resolve();
    } else waiting.push(resolve);
  });

beforeAll(async () => {
  t = await createTestDb();
  // Polling far off: after the first state, what moves a subscriber must be the batch's own hint.
  live = await startLiveGateway(t, { hub: { pollMs: 3_600_000, checkEveryMs: 500, probeTimeoutMs: 500 } });
  await eventually(() => live.hub.listener.mode === 'notify', 10_000, 'the hub to listen');
  engine = engineHarness(t);
  engine.handle('progress.part', async (input: { fail?: boolean }) => {
    await permit();
    if (input?.fail) throw new Error('part failed on purpose');
  });
  await t.service.registerEndpoint(t.actor, { name: 'progress.part', kind: 'HANDLER', handlerName: 'progress.part', maxAttempts: 1 });
  key = (await t.service.bootstrapKey('default', 'VIEWER', 'progress viewer')).key;
  otherKey = (await t.service.bootstrapKey('other', 'ADMIN', 'other admin')).key;
});
afterEach(async () => {
  allow(Infinity);
  await engine.stopAll();
  permits = 0;
  waiting = [];
});
afterAll(async () => {
  await live.close();
  await t.close();
});

const PROGRESS = `subscription($id: ID!) { batchProgress(batchId: $id) { id open total succeeded failed cancelled pending completedAt } }`;
const member = (input: object = {}) => ({ endpointName: 'progress.part', kind: 'IMMEDIATE' as const, input });
const later = () => ({ endpointName: 'progress.part', kind: 'DELAYED' as const, runAt: new Date(Date.now() + 3_600_000) });
const counts = (b: any) => [b.open, b.total, b.succeeded, b.failed, b.cancelled, b.pending, b.completedAt !== null];

describe('batchProgress', () => {
  it('sends the batch at once, before anything about it changes', async () => {
    const { batch } = await t.service.createBatch(t.actor, { open: true, jobs: [later(), later()] });
    const sub = collect(live.client(key), PROGRESS, { id: batch.id });
    // No worker runs and nothing touches the batch: only the subscription's own first read can deliver.
    const [first] = await sub.until((xs) => xs.length >= 1, 5_000, 'the first state');
    expect(first).toEqual({ id: batch.id, open: true, total: 2, succeeded: 0, failed: 0, cancelled: 0, pending: 2, completedAt: null });
    await quietPeriod(QUIET.delivery);
    expect(sub.items).toHaveLength(1);
    expect(sub.completed).toBe(false);
    sub.stop();
    await eventually(() => live.hub.stats().batches === 0, 5_000, 'the watch to be let go');
  });

  it('moves as members are added and end, shows the close, and completes with completedAt set', async () => {
    const { batch } = await t.service.createBatch(t.actor, { open: true, jobs: [member(), member({ fail: true }), later()] });
    const sub = collect(live.client(key), PROGRESS, { id: batch.id });
    await sub.until((xs) => xs.length >= 1, 5_000, 'the first state');
    expect(counts(sub.items[0])).toEqual([true, 3, 0, 0, 0, 3, false]);

    const { job: added } = await t.service.createJob(t.actor, { ...later(), batchId: batch.id });
    await sub.until((xs) => xs.some((x) => x.total === 4), 10_000, 'the added member');

    await engine.worker({ concurrency: 1 });
    allow(1);
    await sub.until((xs) => xs.some((x) => x.succeeded + x.failed === 1), 10_000, 'the first member counted');

    await t.service.closeBatch(t.actor, batch.id);
    await sub.until((xs) => xs.some((x) => x.open === false), 10_000, 'the close');
    expect(sub.items.at(-1).completedAt).toBeNull();

    allow(1);
    await sub.until((xs) => xs.some((x) => x.succeeded === 1 && x.failed === 1), 10_000, 'the second member counted');

    const delayed = (await t.service.batchJobs(t.actor, batch.id, { first: 10 }, null)).edges.map((e) => e.node.id);
    expect(delayed).toContain(added.id);
    await t.service.cancelJob(t.actor, delayed[0]!);
    await sub.until((xs) => xs.some((x) => x.cancelled === 1), 10_000, 'the first cancellation');
    expect(sub.completed).toBe(false);
    await t.service.cancelJob(t.actor, delayed[1]!);
    await sub.until(() => sub.completed, 10_000, 'the stream to complete');

    expect(sub.errors).toEqual([]);
    expect(sub.items.at(-1)).toMatchObject({ open: false, total: 4, succeeded: 1, failed: 1, cancelled: 2, pending: 0 });
    expect(sub.items.at(-1).completedAt).toEqual(expect.any(String));
    expect(new Date(sub.items.at(-1).completedAt).getTime()).toBe((await t.service.batch(t.actor, batch.id)).completedAt!.getTime());
    // Counts only grow, each state differs from the one before it, and only the last is complete.
    const ended = sub.items.map((x) => x.succeeded + x.failed + x.cancelled);
    expect([...ended].sort((a, b) => a - b)).toEqual(ended);
    for (let i = 1; i < sub.items.length; i++) expect(counts(sub.items[i])).not.toEqual(counts(sub.items[i - 1]));
    expect(sub.items.filter((x) => x.completedAt !== null)).toHaveLength(1);
    await eventually(() => live.hub.stats().batches === 0, 5_000, 'the watch to be let go');
  });

  it('sends a completed batch once and completes', async () => {
    const { batch } = await t.service.createBatch(t.actor, { jobs: [] });
    expect(batch.completedAt).not.toBeNull();
    const sub = collect(live.client(key), PROGRESS, { id: batch.id });
    await sub.until(() => sub.completed, 5_000, 'the stream to complete');
    expect(sub.items).toHaveLength(1);
    expect(sub.items[0]).toMatchObject({ open: false, total: 0, pending: 0, completedAt: expect.any(String) });
  });

  it("refuses another workspace's batch with NOT_FOUND, as it refuses an id of no batch, and sends nothing of it", async () => {
    const { batch } = await t.service.createBatch(t.actor, { open: true, jobs: [later()] });
    const theirs = collect(live.client(otherKey), PROGRESS, { id: batch.id });
    const nowhere = collect(live.client(otherKey), PROGRESS, { id: '00000000-0000-4000-8000-000000000000' });
    const notAnId = collect(live.client(otherKey), PROGRESS, { id: 'batch-1' });
    await eventually(() => theirs.errors.length > 0 && nowhere.errors.length > 0 && notAnId.errors.length > 0, 5_000, 'the refusals');
    for (const sub of [theirs, nowhere, notAnId]) {
      expect(sub.items).toEqual([]);
      expect(sub.errors[0]).toMatchObject({ extensions: { code: 'NOT_FOUND' } });
    }
    const message = (sub: typeof theirs, id: string) => (sub.errors[0] as { message: string }).message.replace(id, '<id>');
    expect(message(theirs, batch.id)).toBe(message(nowhere, '00000000-0000-4000-8000-000000000000'));
    // Its changes do not reach the other workspace either.
    await t.service.closeBatch(t.actor, batch.id);
    await quietPeriod(QUIET.delivery);
    expect(theirs.items).toEqual([]);
    expect(live.hub.stats().batches).toBe(0);
  });

  it("ends the stream when the subscriber's key is revoked", async () => {
    const { batch } = await t.service.createBatch(t.actor, { open: true, jobs: [later()] });
    const { apiKey, key: streamer } = await t.service.createApiKey(t.actor, { name: 'progress streamer', role: 'VIEWER' });
    const sub = collect(live.client(streamer), PROGRESS, { id: batch.id });
    await sub.until((xs) => xs.length >= 1, 5_000, 'the first state');
    await t.service.revokeApiKey(t.actor, apiKey.id);
    await eventually(() => sub.errors.length > 0 || sub.completed, 5_000, 'the stream to end');
    await eventually(() => live.hub.stats().batches === 0, 5_000, 'the watch to be let go');
    await t.service.closeBatch(t.actor, batch.id);
    await quietPeriod(QUIET.delivery);
    expect(sub.items).toHaveLength(1);
  });
});
