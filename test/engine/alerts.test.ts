/**
 * Alerts end to end on the real engine: failing work, the INTERNAL evaluator run by workers,
 * webhook deliveries to a real HTTP server on loopback, email to a real SMTP server.
 */
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase } from '../../src/db/pool.js';
import { evaluateAlerts } from '../../src/service/engine/alerts/evaluator.js';
import { registerInternalHandlers } from '../../src/service/engine/maintenance/reaper.js';
import { UnrecoverableError } from '../../src/service/engine/delivery/handler-registry.js';
import { databaseTimeIn, untilDatabaseTimePasses } from '../support/clock.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, settled, type EngineHarness } from '../support/engine.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';

let t: TestDb;
let h: EngineHarness;
let sink: HttpTarget;
let smtp: SMTPServer;
const mails: { to: string[]; data: string }[] = [];
/** Whether the handler `work.flaky` fails, per job name. */
const failing = new Map<string, boolean>();
let sinkEndpointId: string;

beforeAll(async () => {
  t = await createTestDb();
  sink = await startHttpTarget();
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    // As a mail server refuses an unknown mailbox: its reply quotes the address.
    onRcptTo(address, _session, callback) {
      if (address.address.startsWith('refused')) {
        const refusal = Object.assign(new Error(`5.1.1 <${address.address}>: Recipient address rejected: User unknown`), {
          responseCode: 550,
        });
        return callback(refusal);
      }
      callback();
    },
    onData(stream, session, callback) {
      let data = '';
      stream.on('data', (c: Buffer) => (data += c.toString('utf8')));
      stream.on('end', () => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address), data });
        callback();
      });
    },
  });
  await new Promise<void>((r) => smtp.listen(0, '127.0.0.1', () => r()));
  const smtpPort = (smtp.server.address() as AddressInfo).port;
  h = engineHarness(t);
  registerInternalHandlers(h.handlers, t.database.pool, {
    alerts: { smtpUrl: `smtp://127.0.0.1:${smtpPort}`, from: 'jobgate@test.local', defaultTo: ['admins@test.local'] },
  });
  h.handle('work.flaky', async (_input, ctx) => {
    const job = (await t.query('select name from jobs where id = $1', [ctx.jobId])).rows[0];
    if (failing.get(job.name) ?? true) throw new UnrecoverableError('the flaky work failed');
  });
  await t.service.registerEndpoint(t.actor, { name: 'work.flaky', kind: 'HANDLER', handlerName: 'work.flaky', maxAttempts: 1 });
  const endpoint = await t.service.registerEndpoint(t.actor, {
    name: 'alerts.sink',
    kind: 'HTTP',
    url: `${sink.url}/sink`,
    backoffBaseMs: 50,
    backoffMaxMs: 200,
    jitter: false,
    maxAttempts: 10,
  });
  sinkEndpointId = endpoint.id;
  sink.route('/sink', (_req, res) => res.writeHead(200).end('ok'));
  // Three workers: any of them may run the evaluator's executions.
  for (let i = 0; i < 3; i++) await h.worker({ outboundAllow: ['127.0.0.0/8'], defaultTimeoutMs: 5000 });
});
afterAll(async () => {
  await h.stopAll();
  await sink.close();
  await new Promise<void>((r) => smtp.close(() => r()));
  await t.close();
});

async function failingJob(name: string) {
  failing.set(name, true);
  const { job } = await t.service.createJob(t.actor, { endpointName: 'work.flaky', kind: 'IMMEDIATE', name, maxAttempts: 1 });
  await settled(t, job.id);
  return job;
}

/** Runs the job once more (a manual trigger) and waits for that execution's outcome. */
async function runAgain(jobId: string) {
  const { execution } = await t.service.triggerJob(t.actor, { id: jobId, force: true });
  await eventually(async () => {
    const { rows } = await t.query(`select status from executions where id = $1`, [execution.id]);
    return ['SUCCEEDED', 'FAILED'].includes(rows[0]?.status);
  });
}

async function notifications(ruleId: string) {
  return (await t.query(`select * from alert_notifications where rule_id = $1 order by created_at, id`, [ruleId])).rows;
}

async function rule(name: string, extra: Record<string, unknown> = {}) {
  return t.service.createAlertRule(t.actor, { name, condition: 'EXECUTION_FAILED', webhookEndpointId: sinkEndpointId, ...extra });
}

const sinkBodies = () => sink.hitsOf('/sink').map((hit) => JSON.parse(hit.body));

describe('alerts', () => {
  it('notifies once when three workers evaluate the same failure at once', async () => {
    const r = await rule('three workers', { jobIds: [] });
    const job = await failingJob('three-workers');
    // The workspace's evaluator job, run three times at once: one execution per worker.
    const alertsJob = (
      await t.query(
        `select j.id from jobs j join endpoints en on en.id = j.endpoint_id where en.name = 'jobgate.alerts' and j.workspace_id = $1`,
        [t.actor.workspaceId],
      )
    ).rows[0];
    const triggered = await Promise.all(
      [0, 1, 2].map((i) => t.service.triggerJob(t.systemActor, { id: alertsJob.id, force: true, requestId: `three-${i}` })),
    );
    // And three more passes from three other pools (three more processes), at the same moment.
    const pools = [0, 1, 2].map(() => createDatabase({ connectionString: t.url, max: 2 }));
    try {
      await Promise.all(pools.map((p) => evaluateAlerts(p.pool, t.actor.workspaceId)));
    } finally {
      await Promise.all(pools.map((p) => p.close()));
    }
    await eventually(async () => {
      const { rows } = await t.query(`select count(*)::int as n from executions where id = any($1::uuid[]) and status = 'SUCCEEDED'`, [
        triggered.map((x) => x.execution.id),
      ]);
      return rows[0].n === 3;
    });
    const sent = await notifications(r.id);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ kind: 'FIRING', subject_id: job.id, suppressed_count: 0 });
    const delivered = await eventually(
      async () => sinkBodies().filter((b) => b.rule.id === r.id).length > 0 && sinkBodies().filter((b) => b.rule.id === r.id),
    );
    expect(delivered).toHaveLength(1);
    expect(delivered[0]).toMatchObject({
      type: 'jobgate.alert',
      kind: 'FIRING',
      condition: 'EXECUTION_FAILED',
      subject: { type: 'JOB', id: job.id, name: 'three-workers' },
    });
    expect(delivered[0].summary).toContain('the flaky work failed');
  });

  it('rate-limits a subject, counts the suppressed ones in the next notification, and resolves once', async () => {
    const r = await rule('rate limited', { rateLimitMs: 1000 });
    const job = await failingJob('rate-limited');
    await runAgain(job.id);
    await runAgain(job.id);
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    expect((await notifications(r.id)).map((n) => [n.kind, n.suppressed_count])).toEqual([['FIRING', 0]]);
    // The window ends with the job still failing: the next notification reports the two it held back.
    const [first] = await notifications(r.id);
    await untilDatabaseTimePasses(t, new Date(first.created_at.getTime() + 1000));
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    expect((await notifications(r.id)).map((n) => [n.kind, n.suppressed_count])).toEqual([
      ['FIRING', 0],
      ['FIRING', 2],
    ]);
    expect((await notifications(r.id))[1].summary).toContain('2 more since the last notification');
    failing.set('rate-limited', false);
    await runAgain(job.id);
    await runAgain(job.id);
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    expect((await notifications(r.id)).map((n) => n.kind)).toEqual(['FIRING', 'FIRING', 'RESOLVED']);
    await eventually(async () => sinkBodies().filter((b) => b.rule.id === r.id).length === 3);
  });

  it('says nothing about a job that opted out', async () => {
    const r = await rule('opt out');
    failing.set('opted-out', true);
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'work.flaky',
      kind: 'DELAYED',
      runAt: await databaseTimeIn(t, 500),
      name: 'opted-out',
      maxAttempts: 1,
    });
    await t.service.setJobAlertsOptOut(t.actor, { jobId: job.id, optOut: true });
    await settled(t, job.id);
    const other = await failingJob('not-opted-out');
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    expect((await notifications(r.id)).map((n) => n.subject_id)).toEqual([other.id]);
  });

  it('delivers every notification once to a sink that fails, then recovers', async () => {
    const path = '/down-then-up';
    const down = await t.service.registerEndpoint(t.actor, {
      name: 'alerts.down-then-up',
      kind: 'HTTP',
      url: `${sink.url}${path}`,
      backoffBaseMs: 50,
      backoffMaxMs: 200,
      jitter: false,
      maxAttempts: 20,
    });
    let up = false;
    sink.route(path, (_req, res) => (up ? res.writeHead(200).end('ok') : res.writeHead(503).end('down')));
    const r = await rule('down then up', { webhookEndpointId: down.id, webhookFormat: 'SLACK' });
    const job = await failingJob('down-then-up');
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    failing.set('down-then-up', false);
    await runAgain(job.id);
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    const sent = await notifications(r.id);
    expect(sent.map((n) => n.kind)).toEqual(['FIRING', 'RESOLVED']);
    // Both deliveries are retried while the sink is down...
    await eventually(async () => sent.every((n) => sink.hitsOf(path).some((hit) => JSON.parse(hit.body).text.includes(n.id))) || undefined);
    up = true;
    const done = await eventually(async () => {
      const alerts = await t.service.alerts(t.actor, { ruleId: r.id });
      return alerts.edges.every((e) => e.node.webhookDelivery === 'SUCCEEDED') && alerts;
    });
    expect(done.edges).toHaveLength(2);
    // ...and each reaches it exactly once once it is up.
    const { rows } = await t.query(`select count(*)::int as n from executions where job_id = any($1::uuid[]) and status = 'SUCCEEDED'`, [
      sent.map((n) => n.webhook_job_id),
    ]);
    expect(rows[0].n).toBe(2);
    const okHits = (
      await t.query(
        `select count(*)::int as n from attempts a join executions x on x.id = a.execution_id where x.job_id = any($1::uuid[]) and a.outcome = 'SUCCEEDED'`,
        [sent.map((n) => n.webhook_job_id)],
      )
    ).rows[0].n;
    expect(okHits).toBe(2);
    for (const n of sent) expect(sink.hitsOf(path).filter((hit) => JSON.parse(hit.body).text.includes(n.id)).length).toBeGreaterThan(1);
  });

  it('emails the rule recipients, or the default list, over SMTP', async () => {
    const r = await t.service.createAlertRule(t.actor, {
      name: 'by email',
      condition: 'EXECUTION_FAILED',
      email: true,
      emailTo: ['ops@test.local'],
      jobIds: [],
    });
    const job = await failingJob('emailed');
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    const [n] = await notifications(r.id);
    expect(n.subject_id).toBe(job.id);
    const mail = await eventually(async () => mails.find((m) => m.data.includes(n.id)));
    expect(mail.to).toEqual(['ops@test.local']);
    expect(mail.data).toContain('Rule: by email');
    expect(mail.data).toContain('Condition: EXECUTION_FAILED (FIRING)');
    expect(mails.filter((m) => m.data.includes(`X-Jobgate-Alert: ${n.id}`))).toHaveLength(1);
    const fallback = await t.service.createAlertRule(t.actor, {
      name: 'by email to admins',
      condition: 'EXECUTION_FAILED',
      email: true,
      jobIds: [job.id],
    });
    await runAgain(job.id);
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    const [m] = await notifications(fallback.id);
    const second = await eventually(async () => mails.find((x) => x.data.includes(m.id)));
    expect(second.to).toEqual(['admins@test.local']);
  });

  it('reads the recipients from the rule when sending, and records a refused send without the address', async () => {
    const address = 'refused-oncall@test.local';
    const r = await t.service.createAlertRule(t.actor, {
      name: 'refused by the server',
      condition: 'EXECUTION_FAILED',
      email: true,
      emailTo: [address],
      jobIds: [],
    });
    await failingJob('refused');
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    const [n] = await notifications(r.id);
    // The delivery job names the rule: its input is readable by every key of the workspace, the addresses are not.
    const emailJob = (await t.query(`select input from jobs where id = $1`, [n.email_job_id])).rows[0];
    expect(emailJob.input).toMatchObject({ ruleId: r.id, alertId: n.id });
    expect(JSON.stringify(emailJob.input)).not.toContain(address);
    const attempt = await eventually(
      async () =>
        (
          await t.query(
            `select a.error from attempts a join executions x on x.id = a.execution_id where x.job_id = $1 and a.error is not null`,
            [n.email_job_id],
          )
        ).rows[0],
    );
    // The server's reply is kept (what an operator needs to see), the address it quoted is not.
    expect(attempt.error).toContain('Recipient address rejected');
    expect(attempt.error).toContain('<[address]>');
    expect(attempt.error.toLowerCase()).not.toContain(address);
    const execution = (await t.query(`select last_error from executions where job_id = $1`, [n.email_job_id])).rows[0];
    expect(String(execution.last_error).toLowerCase()).not.toContain(address);
    // The rule says where from now on: retries read it again.
    await t.service.updateAlertRule(t.actor, { id: r.id, emailTo: ['fixed-oncall@test.local'] });
    // (Its retry is not waited for: the mail server's backoff is seconds long.)
    await t.query(`update executions set run_after = now() where job_id = $1 and status = 'PENDING'`, [n.email_job_id]);
    const mail = await eventually(async () => mails.find((m) => m.data.includes(n.id)), 15_000);
    expect(mail.to).toEqual(['fixed-oncall@test.local']);
  });

  it('carries no secret: error texts in alerts are the redacted ones the engine stored', async () => {
    const token = 'sk-alert-secret-7731';
    const config = await t.service.setConfig(t.actor, {
      name: 'alerting.secrets',
      entries: [{ key: 'token', value: token, secret: true }],
    });
    // The secret is in the host name: the failure's message (a DNS error) would quote it.
    await t.service.registerEndpoint(t.actor, {
      name: 'alerts.leaky',
      kind: 'HTTP',
      url: `http://{{config.token}}.invalid/x`,
      configId: config.id,
      maxAttempts: 1,
    });
    const r = await rule('no secrets');
    const { job } = await t.service.createJob(t.actor, { endpointName: 'alerts.leaky', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('FAILED');
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    const [n] = await notifications(r.id);
    expect(n.summary).toContain('[redacted]');
    const delivered = await eventually(async () => sinkBodies().find((b) => b.id === n.id));
    for (const text of [JSON.stringify(n), JSON.stringify(delivered)]) {
      expect(text).not.toContain(token);
      expect(text.toLowerCase()).not.toContain(token.toLowerCase());
    }
  });
});
