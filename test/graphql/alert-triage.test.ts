/**
 * Alert triage through the real gateway and a real engine: what is firing now per rule and
 * subject, acknowledging it (who, when, for the episode), silencing a rule or one subject for a
 * bounded duration (recorded, not delivered), expiry on its own, lifting a silence, and bad input.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluateAlerts } from '../../src/service/engine/alerts/evaluator.js';
import { UnrecoverableError } from '../../src/service/engine/delivery/handler-registry.js';
import type { Actor } from '../../src/service/kernel/actor.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
let h: EngineHarness;
let admin: Actor;
let operator: Actor;
let viewer: Actor;
const healthy = { value: false };

beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  h = engineHarness(t);
  h.handle('triage.flaky', () => {
    if (!healthy.value) throw new UnrecoverableError('down');
    return { ok: true };
  });
  await t.service.registerEndpoint(t.actor, { name: 'triage.flaky', kind: 'HANDLER', handlerName: 'triage.flaky', maxAttempts: 1 });
  await h.worker();
  admin = await t.service.authenticate((await t.service.bootstrapKey('default', 'ADMIN', 'on-call admin')).key);
  operator = await t.service.authenticate((await t.service.createApiKey(admin, { name: 'an operator', role: 'OPERATOR' })).key);
  viewer = await t.service.authenticate((await t.service.createApiKey(admin, { name: 'a viewer', role: 'VIEWER' })).key);
});
afterAll(async () => {
  await h.stopAll();
  await g.close();
  await t.close();
});

/** Runs the job `name` once to its end (failing while `healthy` is false), then one evaluator pass. */
async function runOnce(name: string, ok = false): Promise<string> {
  healthy.value = ok;
  const { job } = await t.service.createJob(t.actor, { endpointName: 'triage.flaky', kind: 'IMMEDIATE', name, idempotencyKey: null });
  await settled(t, job.id);
  await evaluateAlerts(t.database.pool, t.actor.workspaceId);
  return job.id;
}

/** Runs the job `jobId` once more to its end (a triggered execution), then one evaluator pass. */
async function runAgain(jobId: string, ok: boolean): Promise<void> {
  healthy.value = ok;
  const finished = async () =>
    (await t.query(`select count(*)::int as n from executions where job_id = $1 and status in ('SUCCEEDED', 'FAILED')`, [jobId])).rows[0]
      .n as number;
  const before = await finished();
  await t.service.triggerJob(t.actor, { id: jobId, force: true });
  await expect.poll(finished, { timeout: 10_000 }).toBe(before + 1);
  await evaluateAlerts(t.database.pool, t.actor.workspaceId);
}

const STATES = `query ($status: [AlertStateStatus!]) { alertStates(first: 50, status: $status) { totalCount nodes {
  id ruleName condition subjectType subjectId subjectName status occurrences acknowledgedAt acknowledgedBy silencedUntil
  silence { id } lastAlert { id kind } } } }`;
const ACK = `mutation ($id: ID!) { acknowledgeAlertState(id: $id) { id status acknowledgedAt acknowledgedBy } }`;
const SILENCE = `mutation ($input: SilenceAlertsInput!) { silenceAlerts(input: $input) {
  id ruleName subjectType subjectId subjectName active startsAt endsAt endedAt comment createdBy } }`;
const UNSILENCE = `mutation ($id: ID!) { unsilenceAlerts(id: $id) { id active endedAt endedBy } }`;

async function stateOf(subjectName: string, status = ['OPEN', 'ACKNOWLEDGED', 'RESOLVED']) {
  const res = await g.gql(STATES, { status }, viewer);
  expect(res.errors).toBeUndefined();
  return res.data.alertStates.nodes.find((n: { subjectName: string }) => n.subjectName === subjectName);
}

const auditOk = async (action: string) =>
  (await t.query(`select count(*)::int as n from audit_log where action = $1 and result_code = 'OK'`, [action])).rows[0].n as number;

describe('alert triage over GraphQL', () => {
  let ruleId: string;

  beforeAll(async () => {
    ruleId = (await t.service.createAlertRule(admin, { name: 'failures', condition: 'EXECUTION_FAILED', email: true })).id;
  });

  it('shows what fires per rule and subject, OPEN until acknowledged; an acknowledgement lasts for the episode and ends when it resolves', async () => {
    const jobId = await runOnce('billing');
    const open = await stateOf('billing');
    expect(open).toMatchObject({
      ruleName: 'failures',
      condition: 'EXECUTION_FAILED',
      subjectType: 'JOB',
      subjectId: jobId,
      status: 'OPEN',
      occurrences: 1,
      acknowledgedAt: null,
      acknowledgedBy: null,
      silencedUntil: null,
      lastAlert: { kind: 'FIRING' },
    });
    // Every role reads it; the default list is what fires now.
    expect((await g.gql(`{ alertStates { totalCount } }`, {}, viewer)).data.alertStates.totalCount).toBe(1);

    // Whoever is on call acknowledges (OPERATOR or ADMIN); a VIEWER is refused and nothing changes.
    const refused = await g.gql(ACK, { id: open.id }, viewer);
    expect(refused.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect((await stateOf('billing')).status).toBe('OPEN');

    const acked = await g.gql(ACK, { id: open.id }, admin);
    expect(acked.errors).toBeUndefined();
    expect(acked.data.acknowledgeAlertState).toMatchObject({ status: 'ACKNOWLEDGED', acknowledgedBy: 'on-call admin' });
    expect(await auditOk('alertState.acknowledge')).toBe(1);
    // Again: the first acknowledgement stands.
    const again = await g.gql(ACK, { id: open.id }, t.actor);
    expect(again.data.acknowledgeAlertState).toEqual(acked.data.acknowledgeAlertState);
    // No longer in the OPEN list, still in what fires now.
    expect(await stateOf('billing', ['OPEN'])).toBeUndefined();
    expect((await stateOf('billing', ['ACKNOWLEDGED'])).id).toBe(open.id);

    // Another failure in the same episode keeps it acknowledged.
    await runAgain(jobId, false);
    expect(await stateOf('billing')).toMatchObject({ status: 'ACKNOWLEDGED', occurrences: 2, acknowledgedBy: 'on-call admin' });

    // It resolves: the acknowledgement ends with the episode; acknowledging now is a CONFLICT that changes nothing.
    await runAgain(jobId, true);
    expect(await stateOf('billing')).toMatchObject({ status: 'RESOLVED', acknowledgedAt: null, acknowledgedBy: null });
    const late = await g.gql(ACK, { id: open.id }, admin);
    expect(late.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', reason: 'NOT_FIRING' });
    expect((await stateOf('billing')).status).toBe('RESOLVED');

    // It fires anew: a new episode, OPEN again.
    await runAgain(jobId, false);
    expect(await stateOf('billing')).toMatchObject({ id: open.id, status: 'OPEN', acknowledgedBy: null, occurrences: 1 });
  });

  it('refuses a bad silence with a code and changes nothing', async () => {
    const count = async () => (await t.query(`select count(*)::int as n from alert_silences`)).rows[0].n;
    const before = await count();
    for (const durationMs of [0, -60_000, 59_999, 30 * 86_400_000 + 1, 90_000.5]) {
      const res = await g.gql(SILENCE, { input: { ruleId, durationMs } }, admin);
      expect(res.errors?.[0]?.extensions, String(durationMs)).toMatchObject({
        code: 'VALIDATION_FAILED',
        reason: 'SILENCE_DURATION',
        issues: [{ path: ['durationMs'] }],
      });
    }
    // The library gets the same refusal (NaN never reaches SQL).
    await expect(t.service.silenceAlerts(t.actor, { ruleId, durationMs: Number.NaN })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
      details: { reason: 'SILENCE_DURATION' },
    });
    const badSubjects = [
      [{ subjectType: 'JOB' }, ['subjectId']],
      [{ subjectType: 'INTERVAL' }, ['subjectName']],
      [{ subjectName: 'x' }, ['subjectType']],
      [{ subjectType: 'JOB', subjectId: crypto.randomUUID(), subjectName: 'x' }, ['subjectName']],
      [{ subjectType: 'RECOVERABLE', subjectName: 'not a name!' }, ['subjectName']],
    ] as const;
    for (const [subject, path] of badSubjects) {
      const res = await g.gql(SILENCE, { input: { ruleId, durationMs: 60_000, ...subject } }, admin);
      expect(res.errors?.[0]?.extensions, JSON.stringify(subject)).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path }] });
    }
    const unknownJob = await g.gql(
      SILENCE,
      { input: { ruleId, durationMs: 60_000, subjectType: 'JOB', subjectId: crypto.randomUUID() } },
      admin,
    );
    expect(unknownJob.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    // A job of another workspace is NOT_FOUND, as everywhere, even under a rule of one's own.
    const theirRule = await t.service.createAlertRule(t.otherActor, { name: 'theirs', condition: 'EXECUTION_FAILED', email: true });
    const ourJob = (await t.query(`select id from jobs where workspace_id = $1 and name = 'billing'`, [t.actor.workspaceId])).rows[0].id;
    await expect(
      t.service.silenceAlerts(t.otherActor, { ruleId: theirRule.id, subjectType: 'JOB', subjectId: ourJob, durationMs: 60_000 }),
    ).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const unknownRule = await g.gql(SILENCE, { input: { ruleId: crypto.randomUUID(), durationMs: 60_000 } }, admin);
    expect(unknownRule.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const tooLong = await g.gql(SILENCE, { input: { ruleId, durationMs: 60_000, comment: 'x'.repeat(501) } }, admin);
    expect(tooLong.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['comment'] }] });
    expect(await count()).toBe(before);
    expect(await auditOk('alertSilence.create')).toBe(0);
  });

  it('records what fires under a silence without delivering it, shows it silenced, and delivers again once the silence expires on its own', async () => {
    const jobId = (
      await t.service.createJob(t.actor, {
        endpointName: 'triage.flaky',
        kind: 'DELAYED',
        runAt: new Date(Date.now() + 3_600_000),
        name: 'payroll',
      })
    ).job.id;
    const created = await g.gql(
      SILENCE,
      { input: { ruleId, subjectType: 'JOB', subjectId: jobId, durationMs: 3_600_000, comment: 'payroll migration tonight' } },
      admin,
    );
    expect(created.errors).toBeUndefined();
    const silence = created.data.silenceAlerts;
    expect(silence).toMatchObject({
      ruleName: 'failures',
      subjectType: 'JOB',
      subjectId: jobId,
      subjectName: 'payroll',
      active: true,
      endedAt: null,
      comment: 'payroll migration tonight',
      createdBy: 'on-call admin',
    });
    // Its end is the database's now plus the duration.
    expect(Date.parse(silence.endsAt) - Date.parse(silence.startsAt)).toBe(3_600_000);
    expect(await auditOk('alertSilence.create')).toBe(1);

    await runAgain(jobId, false);
    const state = await stateOf('payroll');
    expect(state).toMatchObject({ status: 'OPEN', silencedUntil: silence.endsAt, silence: { id: silence.id } });
    const alert = (
      await g.gql(
        `query ($id: ID!) { alert(id: $id) { id silenced silence { id } webhookDelivery emailDelivery emailJob { id } state { id status } } }`,
        {
          id: state.lastAlert.id,
        },
      )
    ).data.alert;
    expect(alert).toEqual({
      id: state.lastAlert.id,
      silenced: true,
      silence: { id: silence.id },
      webhookDelivery: 'NONE',
      emailDelivery: 'NONE',
      emailJob: null,
      state: { id: state.id, status: 'OPEN' },
    });
    expect((await t.query(`select count(*)::int as n from jobs where idempotency_key = $1`, [`alert:${alert.id}`])).rows[0].n).toBe(0);

    // Another subject of the same rule is not covered by this silence: delivered.
    await runOnce('ledger');
    const ledger = await stateOf('ledger');
    const delivered = (await g.gql(`query ($id: ID!) { alert(id: $id) { silenced emailJob { id } } }`, { id: ledger.lastAlert.id })).data
      .alert;
    expect(delivered.silenced).toBe(false);
    expect(delivered.emailJob).not.toBeNull();

    // Time passes (the silence's window moved into the past): it expired by itself, nothing ran.
    await t.query(
      `update alert_silences set starts_at = starts_at - interval '2 hours', ends_at = now() - interval '1 second' where id = $1`,
      [silence.id],
    );
    const active = await g.gql(`{ alertSilences(activeOnly: true) { nodes { id } } }`, {}, viewer);
    expect(active.data.alertSilences.nodes.map((n: { id: string }) => n.id)).not.toContain(silence.id);
    expect((await stateOf('payroll')).silencedUntil).toBeNull();
    // It resolves after the silence: that notification is delivered.
    await runAgain(jobId, true);
    const resolved = await stateOf('payroll');
    expect(resolved.lastAlert.kind).toBe('RESOLVED');
    const after = (await g.gql(`query ($id: ID!) { alert(id: $id) { silenced emailJob { id } } }`, { id: resolved.lastAlert.id })).data
      .alert;
    expect(after).toMatchObject({ silenced: false, emailJob: { id: expect.any(String) } });
  });

  it('silences a whole rule until it is lifted; a VIEWER may not lift it, and lifting it twice changes nothing more', async () => {
    const created = await g.gql(SILENCE, { input: { ruleId, durationMs: 600_000 } }, admin);
    const silence = created.data.silenceAlerts;
    expect(silence).toMatchObject({ subjectType: null, subjectId: null, subjectName: null, active: true });
    await runOnce('reports');
    const quiet = await stateOf('reports');
    expect(quiet.silence).toEqual({ id: silence.id });
    expect((await g.gql(`query ($id: ID!) { alert(id: $id) { silenced } }`, { id: quiet.lastAlert.id })).data.alert.silenced).toBe(true);

    expect((await g.gql(UNSILENCE, { id: silence.id }, viewer)).errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    // The on-call OPERATOR lifts it.
    const lifted = await g.gql(UNSILENCE, { id: silence.id }, operator);
    expect(lifted.data.unsilenceAlerts).toMatchObject({ id: silence.id, active: false, endedBy: 'an operator' });
    const twice = await g.gql(UNSILENCE, { id: silence.id }, admin);
    expect(twice.data.unsilenceAlerts).toEqual(lifted.data.unsilenceAlerts);
    expect((await g.gql(UNSILENCE, { id: crypto.randomUUID() }, admin)).errors?.[0]?.extensions?.code).toBe('NOT_FOUND');

    // Lifted: the next one is delivered.
    await runOnce('exports');
    const loud = await stateOf('exports');
    expect(loud.silence).toBeNull();
    expect((await g.gql(`query ($id: ID!) { alert(id: $id) { silenced } }`, { id: loud.lastAlert.id })).data.alert.silenced).toBe(false);
    const all = await g.gql(`{ alertSilences { nodes { id active endedAt } } }`, {}, viewer);
    expect(all.data.alertSilences.nodes[0]).toMatchObject({ id: silence.id, active: false, endedAt: expect.any(String) });
  });

  it("reads a page of alerts' states together: as many reads for 8 as for 2, each its own (rule, subject)'s", async () => {
    for (const name of ['page-a', 'page-b', 'page-c', 'page-d', 'page-e', 'page-f']) await runOnce(name);
    // The worker polls on the same pool: stopped (the last test), so only the pages' reads are counted.
    await h.stopAll();
    let checkouts = 0;
    const count = () => checkouts++;
    t.database.pool.on('acquire', count);
    const page = async (n: number) => {
      const before = checkouts;
      const res = await g.gql(`{ alerts(first: ${n}) { nodes { id state { id status } } } }`, {}, viewer);
      expect(res.errors).toBeUndefined();
      return { reads: checkouts - before, nodes: res.data.alerts.nodes as { id: string; state: { id: string } | null }[] };
    };
    await page(8); // the first request also fills what the gateway keeps between requests
    const small = await page(2);
    const large = await page(8);
    t.database.pool.off('acquire', count);
    expect(large.nodes).toHaveLength(8);
    expect(large.reads).toBe(small.reads);
    for (const alert of large.nodes) {
      const own = await t.query(
        `select s.id from alert_notifications n
         join alert_states s on s.rule_id = n.rule_id and s.subject_key = n.subject_key
         join alert_rules r on r.id = s.rule_id and r.deleted_at is null
         where n.id = $1`,
        [alert.id],
      );
      expect(alert.state?.id ?? null, alert.id).toBe(own.rows[0]?.id ?? null);
    }
    expect(new Set(large.nodes.map((a) => a.state?.id)).size).toBeGreaterThan(4);
  });
});
