/**
 * Alerts through the real gateway: rule validation and references, the alerts connection with
 * delivery state, and the alertRaised subscription over a real graphql-ws client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluateAlerts } from '../../src/service/engine/alerts/evaluator.js';
import { UnrecoverableError } from '../../src/service/engine/delivery/handler-registry.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';
import { collect, startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let g: TestGateway;
let live: LiveGateway;
let h: EngineHarness;
let viewerKey: string;
let otherKey: string;
let adminKey: string;

beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  live = await startLiveGateway(t);
  h = engineHarness(t);
  h.handle('gql.fails', () => {
    throw new UnrecoverableError('boom');
  });
  await t.service.registerEndpoint(t.actor, { name: 'gql.fails', kind: 'HANDLER', handlerName: 'gql.fails', maxAttempts: 1 });
  await h.worker();
  viewerKey = (await t.service.bootstrapKey('default', 'VIEWER', 'alerts viewer')).key;
  otherKey = (await t.service.bootstrapKey('other', 'VIEWER', 'other viewer')).key;
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'alerts admin')).key;
});
afterAll(async () => {
  await h.stopAll();
  await live.close();
  await g.close();
  await t.close();
});

const CREATE = `mutation ($input: CreateAlertRuleInput!) { createAlertRule(input: $input) { id name condition rateLimitMs email emailTo jobIds } }`;

describe('alert rules over GraphQL', () => {
  it('creates a rule with the defaults, and refuses bad ones with a code and a path', async () => {
    const ok = await g.gql(CREATE, { input: { name: 'all failures', condition: 'EXECUTION_FAILED', email: true } });
    expect(ok.errors).toBeUndefined();
    expect(ok.data.createAlertRule).toMatchObject({
      condition: 'EXECUTION_FAILED',
      rateLimitMs: 6 * 3_600_000,
      email: true,
      emailTo: [],
      jobIds: [],
    });

    const taken = await g.gql(CREATE, { input: { name: 'all failures', condition: 'EXECUTION_FAILED', email: true } });
    expect(taken.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const noDuration = await g.gql(CREATE, { input: { name: 'silent', condition: 'NO_SUCCESS', email: true } });
    expect(noDuration.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['noSuccessMs'] }] });
    const nowhere = await g.gql(CREATE, { input: { name: 'nowhere', condition: 'EXECUTION_FAILED' } });
    expect(nowhere.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
    const handlerEndpoint = (await t.service.registerEndpoint(t.actor, { name: 'gql.not-http', kind: 'HANDLER', handlerName: 'x' })).id;
    const notHttp = await g.gql(CREATE, { input: { name: 'not http', condition: 'EXECUTION_FAILED', webhookEndpointId: handlerEndpoint } });
    expect(notHttp.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['webhookEndpointId'] }] });
    // A job of another workspace is NOT_FOUND, as everywhere.
    const otherEndpoint = await t.service.registerEndpoint(t.otherActor, { name: 'o.ep', kind: 'HANDLER', handlerName: 'o' });
    const { job: otherJob } = await t.service.createJob(t.otherActor, {
      endpointId: otherEndpoint.id,
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 3_600_000),
    });
    const foreign = await g.gql(CREATE, { input: { name: 'foreign', condition: 'EXECUTION_FAILED', email: true, jobIds: [otherJob.id] } });
    expect(foreign.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const tooFast = await g.gql(CREATE, { input: { name: 'too fast', condition: 'EXECUTION_FAILED', email: true, rateLimitMs: 10 } });
    expect(tooFast.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['rateLimitMs'] }] });
    expect((await t.query(`select count(*)::int as n from alert_rules`)).rows[0].n).toBe(1);
  });

  it('accepts plain email addresses only: anything a mailer would read more into is VALIDATION_FAILED at its path, and changes nothing', async () => {
    const rules = async () => (await t.query(`select id, email_to from alert_rules order by id`)).rows;
    const before = await rules();
    const refused = [
      'ops\u0000@example.test',
      'grp:x@evil.test',
      'grp:x@evil.test;',
      'ops(c)@example.test',
      'ops@example.test(c)',
      'ops@[127.0.0.1]',
      'ops@127.0.0.1',
      'Ops <ops@example.test>',
      '<ops@example.test>',
      'ops@example.test, evil@evil.test',
      'ops@example.test;evil@evil.test',
      '"ops evil"@example.test',
      '"ops@evil.test"@example.test',
      'ops@example.test\r\nBcc: evil@evil.test',
      'ops@example.test\n',
      ' ops@example.test',
      'ops@example..test',
      'ops.@example.test',
      'ops%evil.test@example.test',
      'evil.test!ops@example.test',
      'ops@-example.test',
      'opsé@example.test',
      'ops@exämple.test',
      'ops@@example.test',
      'ops',
      `${'a'.repeat(65)}@example.test`,
    ];
    for (const address of refused) {
      const res = await g.gql(CREATE, {
        input: {
          name: `bad ${JSON.stringify(address)}`,
          condition: 'EXECUTION_FAILED',
          email: true,
          emailTo: ['ok@example.test', address],
        },
      });
      expect(res.errors?.[0]?.extensions, JSON.stringify(address)).toMatchObject({
        code: 'VALIDATION_FAILED',
        issues: [{ path: ['emailTo', 1] }],
      });
    }
    expect(await rules()).toEqual(before);
    // An update is refused the same way, and leaves the rule's addresses as they were.
    const id = (
      await g.gql(CREATE, { input: { name: 'plain', condition: 'EXECUTION_FAILED', email: true, emailTo: ['ops@example.test'] } })
    ).data.createAlertRule.id;
    for (const address of ['grp:x@evil.test', 'ops\u0000@example.test']) {
      const res = await g.gql(`mutation ($input: UpdateAlertRuleInput!) { updateAlertRule(input: $input) { id } }`, {
        input: { id, emailTo: [address] },
      });
      expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['emailTo', 0] }] });
    }
    expect((await t.query(`select email_to from alert_rules where id = $1`, [id])).rows[0].email_to).toEqual(['ops@example.test']);
    // What real addresses look like is accepted as it is.
    const accepted = ["o'brien+alerts@mail.example.test", 'on-call_2.team@xn--exmple-cua.test', 'OPS@Example.TEST', 'root@localhost'];
    const ok = await g.gql(`mutation ($input: UpdateAlertRuleInput!) { updateAlertRule(input: $input) { emailTo } }`, {
      input: { id, emailTo: accepted },
    });
    expect(ok.errors).toBeUndefined();
    expect(ok.data.updateAlertRule.emailTo).toEqual(accepted);
    expect((await g.gql(`mutation ($id: ID!) { deleteAlertRule(id: $id) { id } }`, { id })).errors).toBeUndefined();
  });

  it('updates and deletes a rule; a deleted rule is gone from the list', async () => {
    const id = (await g.gql(CREATE, { input: { name: 'to change', condition: 'FINDING', minSeverity: 'ERROR', email: true } })).data
      .createAlertRule.id;
    const updated = await g.gql(
      `mutation ($id: ID!) { updateAlertRule(input: { id: $id, minSeverity: DATA_LOSS, enabled: false }) { minSeverity enabled name } }`,
      { id },
    );
    expect(updated.data.updateAlertRule).toEqual({ minSeverity: 'DATA_LOSS', enabled: false, name: 'to change' });
    const cleared = await g.gql(`mutation ($id: ID!) { updateAlertRule(input: { id: $id, minSeverity: null }) { id } }`, { id });
    expect(cleared.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['minSeverity'] }] });
    expect((await g.gql(`mutation ($id: ID!) { deleteAlertRule(id: $id) { id } }`, { id })).errors).toBeUndefined();
    const list = await g.gql(`{ alertRules(first: 50) { nodes { id } } }`);
    expect(list.data.alertRules.nodes.map((n: { id: string }) => n.id)).not.toContain(id);
    expect((await g.gql(`mutation ($id: ID!) { deleteAlertRule(id: $id) { id } }`, { id })).errors?.[0]?.extensions?.code).toBe(
      'NOT_FOUND',
    );
  });

  it('lists alerts with their delivery state, and streams new ones to the workspace only', async () => {
    const query = `subscription { alertRaised { cursor kind alert { id condition subjectName summary emailDelivery ruleName } } }`;
    const mine = collect(live.client(viewerKey), query);
    const theirs = collect(live.client(otherKey), query);
    await eventually(async () => live.hub.stats().events === 2, 5000, 'both subscriptions to go live');
    const { job } = await t.service.createJob(t.actor, { endpointName: 'gql.fails', kind: 'IMMEDIATE', name: 'streamed' });
    await settled(t, job.id);
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    const [event] = await mine.until((items) => items.length > 0, 10_000, 'the alert event');
    expect(event).toMatchObject({
      kind: 'FIRING',
      alert: { condition: 'EXECUTION_FAILED', subjectName: 'streamed', ruleName: 'all failures' },
    });
    // No worker here runs the INTERNAL email handler: the delivery waits, it is not lost.
    expect(event.alert.emailDelivery).toBe('PENDING');
    const page = await g.gql(`{ alerts(first: 10) { nodes { id kind suppressedCount webhookDelivery emailDelivery summary } } }`);
    expect(page.data.alerts.nodes).toEqual([
      expect.objectContaining({
        id: event.alert.id,
        kind: 'FIRING',
        suppressedCount: 0,
        webhookDelivery: 'NONE',
        emailDelivery: 'PENDING',
      }),
    ]);
    expect(page.data.alerts.nodes[0].summary).toContain('boom');
    // The other workspace's subscriber gets its own workspace's alert, and only that.
    await t.service.registerEndpoint(t.otherActor, { name: 'gql.fails', kind: 'HANDLER', handlerName: 'gql.fails', maxAttempts: 1 });
    await t.service.createAlertRule(t.otherActor, { name: 'theirs', condition: 'EXECUTION_FAILED', email: true });
    const { job: theirJob } = await t.service.createJob(t.otherActor, { endpointName: 'gql.fails', kind: 'IMMEDIATE', name: 'theirs' });
    await settled(t, theirJob.id);
    await evaluateAlerts(t.database.pool, t.otherActor.workspaceId);
    const [their] = await theirs.until((items) => items.length > 0, 10_000, "the other workspace's alert");
    expect(their.alert.subjectName).toBe('theirs');
    expect(theirs.items).toHaveLength(1);
    expect(mine.items).toHaveLength(1);
    mine.stop();
    theirs.stop();
  });

  it('keeps rules and their addresses to ADMIN keys; a VIEWER reads alerts, their stream and their delivery jobs, with no address in them', async () => {
    const address = 'private-oncall@test.local';
    const viewer = await t.service.authenticate(viewerKey);
    const created = await g.gql(CREATE, { input: { name: 'private', condition: 'EXECUTION_FAILED', email: true, emailTo: [address] } });
    const ruleId = created.data.createAlertRule.id;
    const ALERT_FIELDS =
      'id ruleId ruleName condition kind subjectType subjectId subjectName summary detail occurrences suppressedCount webhookDelivery emailDelivery webhookJob { id input }';
    const viewerStream = collect(live.client(viewerKey), `subscription { alertRaised(after: "0") { cursor alert { ${ALERT_FIELDS} } } }`);
    const viewerRule = collect(live.client(viewerKey), `subscription { alertRaised(after: "0") { alert { id rule { emailTo } } } }`);
    const adminRule = collect(live.client(adminKey), `subscription { alertRaised(after: "0") { alert { id ruleName rule { emailTo } } } }`);
    const { job } = await t.service.createJob(t.actor, { endpointName: 'gql.fails', kind: 'IMMEDIATE', name: 'private-failure' });
    await settled(t, job.id);
    await evaluateAlerts(t.database.pool, t.actor.workspaceId);
    const raised = (await t.query(`select id, email_job_id from alert_notifications where rule_id = $1`, [ruleId])).rows[0];

    // The rule: ADMIN only, whichever way it is asked for.
    for (const query of [`{ alertRules { nodes { id emailTo } } }`, `query ($id: ID!) { alertRule(id: $id) { id emailTo } }`]) {
      const res = await g.gql(query, { id: ruleId }, viewer);
      expect(res.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      expect(JSON.stringify(res)).not.toContain(address);
    }
    const viaAlert = await g.gql(`query ($id: ID!) { alert(id: $id) { id rule { emailTo } } }`, { id: raised.id }, viewer);
    expect(viaAlert.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(viaAlert.data?.alert).toEqual({ id: raised.id, rule: null });
    expect((await g.gql(`query ($id: ID!) { alert(id: $id) { rule { emailTo } } }`, { id: raised.id })).data.alert.rule.emailTo).toEqual([
      address,
    ]);

    // Alerts: every field a VIEWER may read, and the delivery jobs, name no address.
    const list = await g.gql(`{ alerts(first: 50) { nodes { ${ALERT_FIELDS} } } }`, {}, viewer);
    expect(list.errors).toBeUndefined();
    expect(list.data.alerts.nodes).toContainEqual(
      expect.objectContaining({ id: raised.id, ruleId, ruleName: 'private', subjectName: 'private-failure' }),
    );
    expect(JSON.stringify(list)).not.toContain(address);
    const emailJob = await g.gql(`query ($id: ID!) { job(id: $id) { id input } }`, { id: raised.email_job_id }, viewer);
    expect(emailJob.data.job.input).toMatchObject({ ruleId, alertId: raised.id });
    expect(JSON.stringify(emailJob)).not.toContain(address);

    // The stream: the same alert, no address; its rule FORBIDDEN to the VIEWER, there for the ADMIN.
    const streamed = await viewerStream.until((items) => items.some((i: any) => i.alert.id === raised.id), 10_000, 'the alert, streamed');
    expect(JSON.stringify(streamed)).not.toContain(address);
    await eventually(async () => viewerRule.errors.length > 0, 10_000, 'the FORBIDDEN rule field');
    expect(viewerRule.errors[0]).toMatchObject({ extensions: { code: 'FORBIDDEN' } });
    expect(JSON.stringify(viewerRule.items)).not.toContain(address);
    const forAdmin = await adminRule.until((items) => items.some((i: any) => i.alert.id === raised.id), 10_000, "the ADMIN's stream");
    expect(forAdmin.find((i: any) => i.alert.id === raised.id).alert).toEqual({
      id: raised.id,
      ruleName: 'private',
      rule: { emailTo: [address] },
    });
    viewerStream.stop();
    viewerRule.stop();
    adminRule.stop();
  });

  it('shows and sets a job opt-out', async () => {
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'gql.fails',
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 3_600_000),
    });
    const set = await g.gql(`mutation ($id: ID!) { setJobAlertsOptOut(input: { jobId: $id, optOut: true }) { alertsOptOut } }`, {
      id: job.id,
    });
    expect(set.data.setJobAlertsOptOut.alertsOptOut).toBe(true);
    const read = await g.gql(`query ($id: ID!) { job(id: $id) { alertsOptOut } }`, { id: job.id });
    expect(read.data.job.alertsOptOut).toBe(true);
  });
});
