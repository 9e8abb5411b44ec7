/**
 * A cron occurrence written ahead of its time and withdrawn before it (an edit, a pause) ends in
 * the event stream, live and on replay: its creation (PENDING) is followed by CANCELLED from
 * PENDING with no attempt, so a page watching the job's executions is not left with one pending
 * for good. Over a real gateway and graphql-ws clients.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { createCronJobScheduler } from '../../src/service/engine/cron/scheduler.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { createCronJobBefore, executionsOf, nextBoundary, pauseOwnCronJobs } from '../support/engine.js';
import { collect, startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let live: LiveGateway;
let key: string;

beforeAll(async () => {
  t = await createTestDb();
  await pauseOwnCronJobs(t);
  await t.service.registerEndpoint(t.actor, { name: 'withdrawn.cron', kind: 'HANDLER', handlerName: 'noop' });
  key = (await t.service.bootstrapKey('default', 'ADMIN', 'withdrawn occurrence test')).key;
  live = await startLiveGateway(t);
});
afterAll(async () => {
  await live?.close();
  await t?.close();
});

const UPDATES = `subscription ($jobId: ID, $after: String) {
  executionUpdates(jobId: $jobId, after: $after) { cursor executionId status previousStatus attemptCount }
}`;

interface Update {
  cursor: string;
  executionId: string;
  status: string;
  previousStatus: string | null;
  attemptCount: number;
}

/**
 * An every-minute job whose next occurrence is the next boundary (test/support/engine.ts), its
 * event cursor from just before it, and `write`: a scheduler pass 20 s before that boundary,
 * which writes the occurrence ahead.
 */
async function cronJob(): Promise<{ jobId: string; cursorBefore: string; write: () => Promise<{ fired: number }> }> {
  const boundary = await nextBoundary(t);
  const job = await createCronJobBefore(t, boundary, {
    endpointName: 'withdrawn.cron',
    kind: 'CRON',
    input: { v: 1 },
    cron: { expression: '* * * * *' },
  });
  const scheduler = createCronJobScheduler({
    pool: t.database.pool,
    log: createLogger('silent'),
    clock: () => new Date(boundary - 20_000),
    leadMs: 30_000,
  });
  const cursorBefore = await t.service.eventCursorBeforeJob(t.actor, job);
  return { jobId: job.id, cursorBefore, write: () => scheduler.tick() };
}

describe('a cron occurrence withdrawn before its time', () => {
  it('is CANCELLED from PENDING in the stream after its creation, live and on replay; the one written again is a new execution', async () => {
    const { jobId, cursorBefore, write } = await cronJob();
    // From the job's creation: whatever is written before the subscription is live is replayed.
    const watching = collect<Update>(live.client(key), UPDATES, { jobId, after: cursorBefore });
    expect((await write()).fired).toBe(1);
    const [ahead] = await executionsOf(t, jobId);
    await watching.until((items) => items.some((u) => u.executionId === ahead.id), 10_000, 'the occurrence written ahead');

    // An edit of the input before its time withdraws it (the scheduler writes it again as the job now is).
    await t.service.updateJob(t.actor, { id: jobId, input: { v: 2 } });
    expect(await executionsOf(t, jobId)).toHaveLength(0);
    const mine = (items: Update[]) => items.filter((u) => u.executionId === ahead.id);
    await watching.until((items) => mine(items).length === 2, 10_000, 'the withdrawal');
    expect(mine(watching.items).map(({ status, previousStatus, attemptCount }) => ({ status, previousStatus, attemptCount }))).toEqual([
      { status: 'PENDING', previousStatus: null, attemptCount: 0 },
      { status: 'CANCELLED', previousStatus: 'PENDING', attemptCount: 0 },
    ]);

    // Written again: another execution, created PENDING, and nothing more for the withdrawn one.
    expect((await write()).fired).toBe(1);
    const [again] = await executionsOf(t, jobId);
    expect(again.id).not.toBe(ahead.id);
    await watching.until((items) => items.some((u) => u.executionId === again.id), 10_000, 'the occurrence written again');
    expect(mine(watching.items)).toHaveLength(2);

    // A page that subscribes later, from before the job's first occurrence, replays the same story.
    const replay = collect<Update>(live.client(key), UPDATES, { jobId, after: cursorBefore });
    const replayed = await replay.until((items) => items.length === 3, 10_000, 'the replay');
    expect(replayed.map((u) => [u.executionId, u.status, u.previousStatus])).toEqual([
      [ahead.id, 'PENDING', null],
      [ahead.id, 'CANCELLED', 'PENDING'],
      [again.id, 'PENDING', null],
    ]);
    expect(watching.errors).toEqual([]);
    expect(replay.errors).toEqual([]);
  });
});
