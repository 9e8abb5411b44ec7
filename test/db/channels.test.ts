/**
 * src/db/channels.ts against the database: the trigger functions the migrations define notify
 * only the channels it declares, each declared with the functions that send on it, and every
 * payload they send, fired for real and received over LISTEN, is one its decoder reads. A
 * migration that adds a notifying trigger or changes a payload's format fails here until
 * src/db/channels.ts says so.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CHANNELS, cancelChannel, liveChannel, probeChannel, runWaitingChannel, workChannel, type Channel } from '../../src/db/channels.js';
import { releaseExecutions } from '../../src/db/statements/lease.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { databaseTimeIn } from '../support/clock.js';
import { eventually } from '../support/eventually.js';

let t: TestDb;
let listening: pg.Client;
const heard: { channel: string; payload: string }[] = [];

beforeAll(async () => {
  t = await createTestDb();
  await t.service.registerEndpoint(t.actor, { name: 'channels.noop', kind: 'HANDLER', handlerName: 'noop' });
  listening = new pg.Client({ connectionString: t.url });
  await listening.connect();
  listening.on('notification', (n) => heard.push({ channel: n.channel, payload: n.payload ?? '' }));
  for (const channel of CHANNELS) await listening.query(`listen ${pg.escapeIdentifier(channel.name)}`);
});
afterAll(async () => {
  await listening?.end();
  await t?.close();
});
beforeEach(() => void heard.splice(0));

const byName = new Map(CHANNELS.map((c) => [c.name, c]));

/** Each function of the database that sends a notification, with the channels it names. */
async function notifyingFunctions(): Promise<Map<string, Set<string>>> {
  const { rows } = await t.query<{ name: string; source: string }>(
    `select p.proname as name, p.prosrc as source from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = current_schema() and (p.prosrc ilike '%pg_notify%' or p.prosrc ~* '\\mnotify\\s')`,
  );
  const out = new Map<string, Set<string>>();
  for (const { name, source } of rows) {
    const body = source.replace(/--.*$/gm, ''); // comments may say anything
    const channels = new Set<string>();
    // Every call must name its channel as a literal: a computed one could not be held to src/db/channels.ts.
    for (const call of body.matchAll(/pg_notify\s*\(\s*([^,]*),/gi)) {
      const literal = /^'([a-z0-9_]+)'$/.exec(call[1]!.trim());
      expect(literal, `${name} notifies a channel that is not a literal: ${call[1]}`).not.toBeNull();
      channels.add(literal![1]!);
    }
    expect(body, `${name} uses NOTIFY; channels.ts holds pg_notify calls only`).not.toMatch(/(^|[^_a-z])notify\s+[a-z_]/i);
    if (channels.size > 0) out.set(name, channels);
  }
  return out;
}

/** The notifications heard since the last reset, each decoded by its channel's decoder. */
function decodedHeard(): { channel: string; payload: string; message: unknown }[] {
  return heard.map(({ channel, payload }) => ({ channel, payload, message: byName.get(channel)?.decode(payload) }));
}

type Expected = readonly [Channel<unknown>, unknown];
/** A message expected on `channel`, typed by it. */
const on = <M>(channel: Channel<M>, message: M): Expected => [channel as Channel<unknown>, message];

/**
 * Runs `act`, waits until each of `expected` has been heard (decoded, on its channel), and checks
 * that everything heard meanwhile decodes: a payload the decoder does not know fails the test.
 */
async function expectHeard(act: () => Promise<unknown>, expected: Expected[]): Promise<void> {
  heard.splice(0);
  await act();
  await eventually(
    () => {
      const got = decodedHeard();
      for (const [channel, message] of expected) expect(got).toContainEqual(expect.objectContaining({ channel: channel.name, message }));
      return true;
    },
    { timeout: 10_000, what: `the notifications ${JSON.stringify(expected.map(([c, m]) => [c.name, m]))}` },
  );
  for (const n of decodedHeard()) expect(n.message, `payload ${JSON.stringify(n.payload)} on ${n.channel}`).toBeDefined();
}

/** Sends a marker and waits for it: it arrives after anything committed before it was sent. */
async function marker(): Promise<void> {
  const from = heard.length;
  await t.query(`select pg_notify($1, $2)`, [liveChannel.name, liveChannel.encode({ kind: 'catalog' })]);
  await eventually(() => heard.slice(from).some((n) => n.channel === liveChannel.name), { timeout: 10_000, what: 'the marker' });
}

/** What each step below fires, by trigger function: together they must cover every notifying one. */
const FIRED = new Set<string>();
const fires = (...names: string[]) => names.forEach((n) => FIRED.add(n));

describe('the channels of src/db/channels.ts', () => {
  it('declare every channel a trigger function notifies, with the functions that send on it', async () => {
    const functions = await notifyingFunctions();
    const declared = new Map<string, Set<string>>();
    for (const channel of CHANNELS)
      for (const fn of channel.sentByTriggers) declared.set(fn, (declared.get(fn) ?? new Set()).add(channel.name));
    for (const [fn, channels] of functions) {
      for (const name of channels) {
        expect(byName.has(name), `${fn} notifies ${name}, which src/db/channels.ts does not declare`).toBe(true);
        expect(byName.get(name)!.sentByTriggers, `${name} in src/db/channels.ts does not name its sender ${fn}`).toContain(fn);
      }
    }
    // And nothing declared that the database does not do.
    expect(new Map([...declared].map(([fn, chs]) => [fn, [...chs].sort()]))).toEqual(
      new Map([...functions].map(([fn, chs]) => [fn, [...chs].sort()])),
    );
    expect(new Set(CHANNELS.map((c) => c.name)).size).toBe(CHANNELS.length);
  });

  it('read what the job and execution triggers send when a job is created and cancelled', async () => {
    let jobId = '';
    fires('jobgate_notify_work', 'jobgate_events_jobs_insert', 'jobgate_events_executions_insert');
    await expectHeard(async () => {
      const { job } = await t.service.createJob(t.actor, { endpointName: 'channels.noop', kind: 'IMMEDIATE', input: {} });
      jobId = job.id;
    }, [on(workChannel, { kind: 'work' }), on(liveChannel, { kind: 'events' })]);
    fires('jobgate_events_jobs_update', 'jobgate_events_executions_update');
    await expectHeard(() => t.service.cancelJob(t.actor, jobId), [on(liveChannel, { kind: 'events' })]);
  });

  it('read what the execution trigger sends for work due later: when it is due, and nothing for work nobody can claim', async () => {
    const wakes = () =>
      decodedHeard()
        .filter((n) => n.channel === workChannel.name)
        .map((n) => n.message);
    // On the database's clock: the hint counts from it.
    const runAt = await databaseTimeIn(t, 60_000);
    await expectHeard(
      () => t.service.createJob(t.actor, { endpointName: 'channels.noop', kind: 'DELAYED', runAt }),
      [on(workChannel, { kind: 'due', inMs: expect.any(Number) as number })],
    );
    await marker();
    expect(wakes()).toEqual([{ kind: 'due', inMs: expect.any(Number) }]);
    const [due] = wakes() as { inMs: number }[];
    expect(due!.inMs).toBeGreaterThan(55_000);
    expect(due!.inMs).toBeLessThanOrEqual(60_000);
    // Blocked on a prerequisite: nothing to claim until it is settled (which sends its own wake).
    await expectHeard(
      () =>
        t.query(
          `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, blocked)
           select workspace_id, job_id, endpoint_id, scheduled_for + interval '1 day', now(), max_attempts, true
           from executions limit 1`,
        ),
      [on(liveChannel, { kind: 'events' })],
    );
    await marker();
    expect(wakes()).toEqual([]);
  });

  it('read what withdrawing a cron occurrence written ahead of its time sends', async () => {
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'channels.noop',
      kind: 'CRON',
      input: {},
      cron: { expression: '0 0 1 1 *' },
    });
    // As the scheduler writes one ahead (src/db/statements/cron-ticks.ts): its execution, due in an hour, and ahead_at.
    await t.query(
      `with ahead as (
         insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, trigger)
         select workspace_id, id, endpoint_id, now() + interval '1 hour', now() + interval '1 hour', 1, 'SCHEDULE' from jobs where id = $1
         returning scheduled_for)
       update jobs set ahead_at = (select scheduled_for from ahead) where id = $1`,
      [job.id],
    );
    fires('jobgate_withdraw_ahead');
    await expectHeard(() => t.service.pauseJob(t.actor, job.id), [on(liveChannel, { kind: 'events' })]);
    expect((await t.query('select status from events where job_id = $1 and topic = $2 order by id', [job.id, 'EXECUTION'])).rows).toEqual([
      { status: 'PENDING' },
      { status: 'CANCELLED' },
    ]);
  });

  it('read what settling a dependent sends when its prerequisite ends', async () => {
    const { job: prerequisite } = await t.service.createJob(t.actor, { endpointName: 'channels.noop', kind: 'IMMEDIATE', input: {} });
    await t.service.createJob(t.actor, {
      endpointName: 'channels.noop',
      kind: 'IMMEDIATE',
      dependsOn: [prerequisite.id],
      onPrerequisiteFailure: 'RUN',
    });
    // Its prerequisite cancelled, the dependent (RUN) is released: work for the workers.
    fires('jobgate_settle_dependents');
    await expectHeard(() => t.service.cancelJob(t.actor, prerequisite.id), [on(workChannel, { kind: 'work' })]);
  });

  it('read what cancelling a parent sends for its running child', async () => {
    const { job: parent } = await t.service.createJob(t.actor, {
      endpointName: 'channels.noop',
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 3_600_000),
    });
    const parentExecution = (await t.query(`select id from executions where job_id = $1`, [parent.id])).rows[0].id;
    const { job: child } = await t.service.createJob(t.actor, {
      endpointName: 'channels.noop',
      kind: 'IMMEDIATE',
      parentExecutionId: parentExecution,
    });
    const { rows } = await t.query<{ id: string }>(
      `update executions set status = 'RUNNING', lease_owner = 'channels-worker', lease_epoch = lease_epoch + 1,
              lease_expires_at = now() + interval '1 minute', attempt_count = 1
       where job_id = $1 returning id`,
      [child.id],
    );
    fires('jobgate_parent_cancelled');
    await expectHeard(() => t.service.cancelJob(t.actor, parent.id), [on(cancelChannel, { executionId: rows[0]!.id })]);
  });

  it('read what the run, finding and catalogue triggers send when a run is triggered, finds, and is cancelled', async () => {
    let runId = '';
    fires('jobgate_events_runs_insert', 'jobgate_catalog_hint');
    await expectHeard(async () => {
      runId = (await t.service.triggerRun(t.actor, { name: 'channels.scan', force: true })).run.id;
    }, [on(liveChannel, { kind: 'events' }), on(liveChannel, { kind: 'catalog' }), on(runWaitingChannel, { name: 'channels.scan' })]);
    fires('jobgate_events_runs_update');
    await expectHeard(
      () => t.query(`update runs set processed = processed + 10, total = 100 where id = $1`, [runId]),
      [on(liveChannel, { kind: 'run', runId })],
    );
    fires('jobgate_events_findings_insert');
    await expectHeard(
      () =>
        t.query(
          `insert into findings (workspace_id, run_id, kind, severity, resource_id, detail)
           select workspace_id, id, 'orphan', 'WARNING', 'r-1', '{}' from runs where id = $1`,
          [runId],
        ),
      [on(liveChannel, { kind: 'findings' })],
    );
    await expectHeard(
      () => t.service.cancelRun(t.actor, runId),
      [on(liveChannel, { kind: 'events' }), on(liveChannel, { kind: 'run', runId }), on(liveChannel, { kind: 'catalog' })],
    );
  });

  it('read what the batch trigger sends when a member is added, the batch closed and completed, and nothing for an update that moves no count', async () => {
    const { batch } = await t.service.createBatch(t.actor, { open: true });
    const batchId = batch.id;
    fires('jobgate_events_batches_update');
    // Each step ends with a notification of its own, sent after the step committed: once it is
    // heard, so is every hint the step's commit sent (they arrive in commit order), and none of
    // them can land in the next step's window.
    const drained = (act: () => Promise<unknown>) => async () => {
      await act();
      await t.query(`select pg_notify('jobgate_work', '')`);
    };
    const work = on(workChannel, { kind: 'work' });
    let jobId = '';
    // Adding the member moves total; cancelling it counts it; closing completes the batch.
    await expectHeard(
      drained(async () => {
        jobId = (await t.service.createJob(t.actor, { endpointName: 'channels.noop', kind: 'IMMEDIATE', input: {}, batchId })).job.id;
      }),
      [on(liveChannel, { kind: 'batch', batchId }), work],
    );
    await expectHeard(
      drained(() => t.service.cancelJob(t.actor, jobId)),
      [on(liveChannel, { kind: 'batch', batchId }), work],
    );
    await expectHeard(
      drained(() => t.service.closeBatch(t.actor, batchId)),
      [on(liveChannel, { kind: 'batch', batchId }), work],
    );
    expect((await t.service.batch(t.actor, batchId)).completedAt).not.toBeNull();
    // A hint the first update sent would arrive before the second's notification, which bounds the wait.
    await expectHeard(async () => {
      await t.query(`update batches set updated_at = now(), name = 'renamed' where id = $1`, [batchId]);
      await t.query(`select pg_notify('jobgate_work', '')`);
    }, [on(workChannel, { kind: 'work' })]);
    expect(decodedHeard().filter((n) => (n.message as { kind?: string } | undefined)?.kind === 'batch')).toEqual([]);
  });

  it('read what the interval and worker triggers send when a tick is made due and a worker registers', async () => {
    await expectHeard(
      () =>
        t.query(`insert into interval_handlers (name, every_ms, next_due_at) values ('channels.tick', 60000, now() + interval '1 minute')`),
      [on(liveChannel, { kind: 'catalog' })],
    );
    fires('jobgate_notify_interval_due');
    // As triggerHandler does (src/db/repositories/handlers.ts, makeIntervalDueNow).
    await expectHeard(
      () => t.query(`update interval_handlers set next_due_at = now(), updated_at = now() where name = 'channels.tick'`),
      [on(workChannel, { kind: 'interval', name: 'channels.tick' }), on(liveChannel, { kind: 'catalog' })],
    );
    // As a worker's presence does (src/db/statements/workers.ts).
    await expectHeard(
      () => t.query(`insert into workers (id, host, pid, stale_ms, handlers) values ($1, 'host', 1, 30000, '[]')`, [randomUUID()]),
      [on(liveChannel, { kind: 'catalog' })],
    );
  });

  it('read what the alert trigger sends when a notification is recorded', async () => {
    fires('jobgate_events_alerts_insert');
    const { rows } = await t.query<{ id: string }>(
      `insert into alert_rules (workspace_id, name, condition, email) values ($1, 'channels', 'EXECUTION_FAILED', true) returning id`,
      [t.actor.workspaceId],
    );
    const subject = randomUUID();
    // As the evaluator writes one (src/db/statements/alert-notify.ts, insertNotification).
    await expectHeard(
      () =>
        t.query(
          `insert into alert_notifications (workspace_id, rule_id, condition, kind, subject_type, subject_key, subject_id, subject_name,
                                            window_start, first_seen_at, last_seen_at, occurrences, suppressed_count, summary, detail)
           values ($1, $2, 'EXECUTION_FAILED', 'FIRING', 'JOB', $3, $4, 'job', now(), now(), now(), 1, 0, 'failed', '{}'::jsonb)`,
          [t.actor.workspaceId, rows[0]!.id, `job:${subject}`, subject],
        ),
      [on(liveChannel, { kind: 'events' })],
    );
  });

  it('were each fired above: every notifying trigger function of the database', async () => {
    expect([...FIRED].sort()).toEqual([...(await notifyingFunctions()).keys()].sort());
  });

  it('read what jobgate sends itself: a key revoked, a running execution cancelled', async () => {
    const { apiKey } = await t.service.createApiKey(t.actor, { name: 'channels', role: 'VIEWER' });
    await expectHeard(() => t.service.revokeApiKey(t.actor, apiKey.id), [on(liveChannel, { kind: 'key', keyId: apiKey.id })]);
    const { job } = await t.service.createJob(t.actor, { endpointName: 'channels.noop', kind: 'IMMEDIATE', input: {} });
    // As a claim leaves it: running under a worker's lease.
    const { rows } = await t.query<{ id: string }>(
      `update executions set status = 'RUNNING', lease_owner = 'channels-worker', lease_epoch = lease_epoch + 1,
              lease_expires_at = now() + interval '1 minute', attempt_count = 1
       where job_id = $1 returning id`,
      [job.id],
    );
    await expectHeard(() => t.service.cancelJob(t.actor, job.id), [on(cancelChannel, { executionId: rows[0]!.id })]);
  });

  it('read what a release of leases sends: one wake when it took an execution back, none when the fence refused every lease', async () => {
    const { job } = await t.service.createJob(t.actor, { endpointName: 'channels.noop', kind: 'IMMEDIATE', input: {} });
    const { rows } = await t.query<{ id: string; epoch: string }>(
      `update executions set status = 'RUNNING', lease_owner = 'channels-worker', lease_epoch = lease_epoch + 1,
              lease_expires_at = now() + interval '1 minute', attempt_count = 1
       where job_id = $1 returning id, lease_epoch as epoch`,
      [job.id],
    );
    const { id, epoch } = rows[0]!;
    /** The work wakes heard between a marker sent before `act` and one sent after it. */
    const wakesOf = async (act: () => Promise<unknown>) => {
      await marker();
      const from = heard.length;
      await act();
      await marker();
      return heard
        .slice(from)
        .filter((n) => n.channel === workChannel.name)
        .map((n) => workChannel.decode(n.payload));
    };
    // A lease taken over (another epoch): nothing comes back, so nobody is woken.
    expect(
      await wakesOf(async () => expect(await releaseExecutions(t.database.pool, [{ id, epoch: Number(epoch) - 1 }])).toEqual([])),
    ).toEqual([]);
    expect(
      await wakesOf(async () => expect(await releaseExecutions(t.database.pool, [{ id, epoch: Number(epoch) }])).toEqual([id])),
    ).toEqual([{ kind: 'work' }]);
  });

  it('decode what they encode, and nothing else', () => {
    const id = randomUUID();
    const roundTrips: Expected[] = [
      on(workChannel, { kind: 'work' }),
      on(workChannel, { kind: 'interval', name: 'a.b' }),
      on(workChannel, { kind: 'due', inMs: 1500 }),
      on(cancelChannel, { executionId: id }),
      on(liveChannel, { kind: 'events' }),
      on(liveChannel, { kind: 'findings' }),
      on(liveChannel, { kind: 'catalog' }),
      on(liveChannel, { kind: 'run', runId: id }),
      on(liveChannel, { kind: 'batch', batchId: id }),
      on(liveChannel, { kind: 'key', keyId: id }),
      on(runWaitingChannel, { name: 'a.b' }),
    ];
    for (const [channel, message] of roundTrips) expect(channel.decode(channel.encode(message))).toEqual(message);
    expect(workChannel.decode('something')).toBeUndefined();
    expect(workChannel.decode('due:')).toBeUndefined();
    expect(workChannel.decode('due:-5')).toBeUndefined();
    expect(cancelChannel.decode('')).toBeUndefined();
    expect(liveChannel.decode('x')).toBeUndefined();
    expect(liveChannel.decode('r:')).toBeUndefined();
    expect(liveChannel.decode('b:')).toBeUndefined();
    expect(probeChannel.decode(probeChannel.encode('abc'))).toBe('abc');
    expect(probeChannel.decode('e')).toBeUndefined();
  });
});
