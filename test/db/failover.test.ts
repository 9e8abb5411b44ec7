/**
 * A failover, with real parts: a primary with a synchronous streaming replica (Debian's server
 * binaries, test/support/replica.ts), and the one address jobgate connects to in front of them
 * (test/support/tcp-switch.ts), as a managed Postgres gives. One jobgate process (gateway, worker,
 * scheduler, live hub) works through that address while a client creates jobs, a cron job fires
 * every minute and a subscriber watches every execution. The primary crashes (`pg_ctl -m
 * immediate`), the replica is promoted and the address moves to it, with a minute's boundary inside
 * the outage. Then, with nothing restarted:
 *
 *  - every job whose creation was acknowledged exists and succeeded: 0 lost;
 *  - each with one attempt, its handler run once: no attempt spent, no stale or doubled write;
 *  - the cron job fired every minute once, the one inside the outage included;
 *  - the subscriber got every committed event of every execution it saw begin, in order, once.
 *
 * It prints the time from the address moving to the first execution completed on the new primary.
 */
import { createClient, type Client } from 'graphql-ws';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startApp, type RunningApp } from '../../src/app.js';
import { createDatabase } from '../../src/db/pool.js';
import { parseConfig } from '../../src/environment.js';
import { createLogger } from '../../src/log.js';
import { HandlerRegistry } from '../../src/service/engine/delivery/handler-registry.js';
import { createJobService } from '../../src/service/index.js';
import { eventually } from '../support/eventually.js';
import { postGraphql } from '../support/graphql.js';
import { collect } from '../support/live.js';
import { startReplicatedPostgres, type ReplicatedPostgres } from '../support/replica.js';
import { startTcpSwitch, type TcpSwitch } from '../support/tcp-switch.js';

const HANDLER = 'failover.work';
const EVENTS = `subscription { executionUpdates { executionId jobId status attemptCount cursor } }`;

let pair: ReplicatedPostgres;
let front: TcpSwitch;
let app: RunningApp;
let ws: Client;
let key: string;
/** Executions whose handler ran, once per run. */
const ran: string[] = [];

beforeAll(async () => {
  pair = await startReplicatedPostgres({ synchronous: true });
  const admin = new pg.Client({ connectionString: pair.primaryUrl('postgres') });
  await admin.connect();
  await admin.query('create database jobgate');
  await admin.end();
  front = await startTcpSwitch(pair.primaryPort);
  const handlers = new HandlerRegistry();
  handlers.register(HANDLER, undefined, async (_input, ctx) => {
    ran.push(ctx.executionId);
    await new Promise((resolve) => setTimeout(resolve, 20));
  });
  const config = parseConfig({ DATABASE_URL: front.url('jobgate'), PORT: '0' });
  app = await startApp({ config, log: createLogger('silent'), handlers });
  const direct = createDatabase({ connectionString: pair.primaryUrl('jobgate'), max: 2 });
  key = (await createJobService({ db: direct.db, pool: direct.pool, defaultMaxAttempts: 3 }).bootstrapKey('default', 'ADMIN', 'failover'))
    .key;
  await direct.close();
  ws = createClient({
    url: app.url.replace(/^http/, 'ws'),
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    connectionParams: { authorization: `Bearer ${key}` },
  });
}, 120_000);

afterAll(async () => {
  await ws?.dispose();
  await app?.stop();
  await front?.close();
  await pair?.stop();
});

const gql = (query: string, variables: Record<string, unknown> = {}) => postGraphql(app.url, key, query, variables);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Sleeps until the wall clock's second within the minute is `second` (this minute's, or the next's). */
async function untilSecond(second: number): Promise<void> {
  const now = Date.now();
  const minute = Math.floor(now / 60_000) * 60_000;
  const at = minute + second * 1000 > now ? minute + second * 1000 : minute + 60_000 + second * 1000;
  await sleep(at - now);
}

describe('a failover to a promoted replica', () => {
  it('loses no acknowledged job, spends no attempt, misses and doubles no cron tick, and drops no live event', async () => {
    await gql(
      `mutation { registerEndpoint(input: { name: "failover.e", kind: HANDLER, handlerName: "${HANDLER}", maxAttempts: 3 }) { id } }`,
    );
    const cron = (
      await gql(
        `mutation { createJob(input: { kind: CRON, endpointName: "failover.e", cron: { expression: "* * * * *", timezone: "UTC" } }) { job { id } } }`,
      )
    ).createJob.job.id as string;
    const live = collect<{ executionId: string; jobId: string; status: string; attemptCount: number; cursor: string }>(ws, EVENTS);
    // The subscription is live once it delivers: a first job, created until one event arrives.
    await eventually(
      async () => {
        await gql(`mutation { createJob(input: { kind: IMMEDIATE, endpointName: "failover.e", input: {} }) { job { id } } }`);
        await sleep(200);
        return live.items.length > 0;
      },
      20_000,
      'the subscription to deliver',
    );

    // A client creating jobs all along, 20 a second; what the API acknowledged must not be lost.
    const acknowledged: string[] = [];
    let refused = 0;
    let producing = true;
    const producer = (async () => {
      while (producing) {
        try {
          const data = await gql(
            `mutation { createJob(input: { kind: IMMEDIATE, endpointName: "failover.e", input: {} }) { job { id } } }`,
          );
          acknowledged.push(data.createJob.job.id);
        } catch {
          refused++;
        }
        await sleep(50);
      }
    })();

    // The crash a few seconds before a minute's boundary; the address moves a second after it.
    await untilSecond(56);
    const boundary = new Date(Math.ceil(Date.now() / 60_000) * 60_000);
    await pair.stopPrimary('immediate');
    front.cut();
    await pair.promote();
    await sleep(Math.max(0, boundary.getTime() + 1_000 - Date.now()));
    front.moveTo(pair.replicaPort);
    const movedAt = Date.now();
    const seenBefore = live.items.length;
    const firstDone = live
      .until((items) => items.slice(seenBefore).some((e) => e.status === 'SUCCEEDED'), 60_000, 'an execution completed after the move')
      .then(() => Date.now() - movedAt);
    await sleep(5_000);
    producing = false;
    await producer;
    console.log(`failover: the address moved to the promoted replica; first execution completed ${await firstDone} ms later`);

    const db = new pg.Client({ connectionString: pair.replicaUrl('jobgate') });
    await db.connect();
    try {
      expect(acknowledged.length).toBeGreaterThan(50);
      expect(refused).toBeGreaterThan(0);
      // Every acknowledged job is there, and each of its executions ends SUCCEEDED, first time.
      const settledRows = async () =>
        (
          await db.query<{ job_id: string; id: string; status: string; attempt_count: number; attempts: number; succeeded: number }>(
            `select e.job_id, e.id, e.status, e.attempt_count,
                    (select count(*)::int from attempts a where a.execution_id = e.id) as attempts,
                    (select count(*)::int from attempts a where a.execution_id = e.id and a.outcome = 'SUCCEEDED') as succeeded
               from executions e where e.job_id = any($1::uuid[])`,
            [acknowledged],
          )
        ).rows;
      await eventually(
        async () => (await settledRows()).filter((r) => r.status === 'SUCCEEDED').length === acknowledged.length,
        60_000,
        'every acknowledged job to succeed',
      );
      const rows = await settledRows();
      expect(new Set(rows.map((r) => r.job_id)).size).toBe(acknowledged.length);
      expect(rows.filter((r) => r.status !== 'SUCCEEDED' || r.attempt_count !== 1 || r.attempts !== 1 || r.succeeded !== 1)).toEqual([]);
      for (const r of rows) expect(ran.filter((id) => id === r.id)).toEqual([r.id]);

      // The cron job: one execution a minute, the boundary inside the outage included, none twice.
      await eventually(
        async () =>
          (await db.query(`select 1 from executions where job_id = $1 and scheduled_for = $2 and status = 'SUCCEEDED'`, [cron, boundary]))
            .rowCount === 1,
        60_000,
        'the occurrence due during the outage to run',
      );
      const ticks = (
        await db.query<{ scheduled_for: Date; n: number }>(
          `select scheduled_for, count(*)::int as n from executions where job_id = $1 group by scheduled_for order by scheduled_for`,
          [cron],
        )
      ).rows;
      expect(ticks.every((t) => t.n === 1)).toBe(true);
      const minutes = ticks.map((t) => t.scheduled_for.getTime());
      for (let i = 1; i < minutes.length; i++) expect(minutes[i]! - minutes[i - 1]!).toBe(60_000);
      expect(minutes).toContain(boundary.getTime());

      // The subscriber: for each execution whose creation it saw, every committed event, in order, once.
      const firstSeen = new Set(live.items.filter((e) => e.status === 'PENDING' && e.attemptCount === 0).map((e) => e.executionId));
      expect(firstSeen.size).toBeGreaterThan(50);
      const committed = (
        await db.query<{ subject_id: string; status: string }>(
          `select subject_id, status from events where topic = 'EXECUTION' and subject_id = any($1::uuid[]) order by id`,
          [[...firstSeen]],
        )
      ).rows;
      const byExecution = (pairs: { id: string; status: string }[]) => {
        const out = new Map<string, string[]>();
        for (const p of pairs) out.set(p.id, [...(out.get(p.id) ?? []), p.status]);
        return out;
      };
      const received = () =>
        byExecution(live.items.filter((e) => firstSeen.has(e.executionId)).map((e) => ({ id: e.executionId, status: e.status })));
      // Every execution has ended in the database; its last events may still be on their way.
      await eventually(() => {
        expect(received()).toEqual(byExecution(committed.map((c) => ({ id: c.subject_id, status: c.status }))));
        return true;
      }, 15_000);
      expect(live.errors).toEqual([]);
    } finally {
      await db.end();
    }
  }, 240_000);
});
