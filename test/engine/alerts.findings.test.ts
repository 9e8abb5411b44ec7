/**
 * Alerts about recoverable handlers, by the real engine: a findings notification groups a pass's
 * findings by (kind, severity) with their counts and the worst example; a recoverable handler
 * registered with `alertsOptOut` raises no alert of any condition, and the catalogue says so.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { evaluateAlerts } from '../../src/service/engine/alerts/evaluator.js';
import { createEngineHost, type EngineHost } from '../../src/service/engine/runtime/host.js';
import { IntervalRegistry } from '../../src/service/engine/intervals/intervals.js';
import { outcome, RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { registerInternalHandlers } from '../../src/service/engine/maintenance/reaper.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, type EngineHarness } from '../support/engine.js';
import { createTestGateway } from '../support/graphql.js';

let t: TestDb;
let host: EngineHost;
let h: EngineHarness;
let webhookId: string;

type Severity = 'INFO' | 'WARNING' | 'ERROR' | 'DATA_LOSS';
/** What an audit run records: [kind, severity, how many]. */
type Plan = { found: [string, Severity, number][]; fail?: boolean };

beforeAll(async () => {
  t = await createTestDb();
  const recoverables = new RecoverableRegistry();
  const audit = async (store: Parameters<Parameters<RecoverableRegistry['register']>[0]['run']>[0], params: Plan) => {
    for (const [kind, severity, n] of params.found)
      for (let i = 0; i < n; i++) await store.recordFinding({ kind, severity, resourceId: `${store.runId}/${kind}/${i}` });
    return params.fail ? outcome.failed('audit broke') : outcome.completed();
  };
  recoverables.register({ name: 'findings.audit', run: audit });
  recoverables.register({ name: 'findings.quiet', alertsOptOut: true, run: audit });
  // Every pass is the test's own (evaluate()).
  await t.query(`update jobs set status = 'PAUSED', next_fire_at = null where name = 'alerts'`);
  h = engineHarness(t);
  registerInternalHandlers(h.handlers, t.database.pool);
  await h.worker();
  host = createEngineHost({
    pool: t.database.pool,
    log: createLogger('silent'),
    handlers: h.handlers,
    recoverables,
    intervals: new IntervalRegistry(),
    triggerRun: t.service.triggerRun,
    staleMs: 2000,
    pollMs: 50,
  });
  await host.start();
  // Never reached (no worker may call out here): the tests read the notification rows.
  webhookId = (await t.service.registerEndpoint(t.actor, { name: 'findings.hook', kind: 'HTTP', url: 'http://127.0.0.1:9/hook' })).id;
});
afterAll(async () => {
  await host.stop({ graceMs: 1000 });
  await h.stopAll();
  await t.close();
});

const evaluate = () => evaluateAlerts(t.database.pool, t.actor.workspaceId);
const sent = async (ruleId: string) =>
  (await t.query(`select * from alert_notifications where rule_id = $1 order by created_at, id`, [ruleId])).rows;

async function runToEnd(name: string, params: Plan) {
  const { run } = await t.service.triggerRun(t.actor, { name, params });
  await eventually(async () => ['COMPLETED', 'FAILED'].includes((await t.service.run(t.actor, run.id)).status));
  return run;
}

describe('findings notifications', () => {
  it('group a pass of findings by (kind, severity) with counts and the worst example, none left over as suppressed', async () => {
    const rule = await t.service.createAlertRule(t.actor, {
      name: 'audit findings',
      condition: 'FINDING',
      minSeverity: 'WARNING',
      handlerNames: ['findings.audit'],
      webhookEndpointId: webhookId,
    });
    const run = await runToEnd('findings.audit', {
      found: [
        ['missing-row', 'ERROR', 3],
        ['stale', 'WARNING', 2],
        ['orphan', 'DATA_LOSS', 1],
        ['note', 'INFO', 4],
      ],
    });
    await evaluate();
    const notes = await sent(rule.id);
    expect(notes).toHaveLength(1);
    const [n] = notes;
    expect(n).toMatchObject({ kind: 'FIRING', subject_name: 'findings.audit', occurrences: 6, suppressed_count: 0 });
    // The worst example first (its fields where a single finding's were), then the groups, worst first.
    expect(n.detail).toMatchObject({
      runId: run.id,
      kind: 'orphan',
      severity: 'DATA_LOSS',
      resourceId: `${run.id}/orphan/0`,
      findings: 6,
      runIds: [run.id],
      moreGroups: 0,
    });
    expect(n.detail.groups.map((g: { kind: string; severity: string; count: number }) => [g.severity, g.kind, g.count])).toEqual([
      ['DATA_LOSS', 'orphan', 1],
      ['ERROR', 'missing-row', 3],
      ['WARNING', 'stale', 2],
    ]);
    expect(n.detail.groups[1].example).toMatchObject({ runId: run.id, resourceId: `${run.id}/missing-row/0` });
    expect(n.summary).toBe(
      'A run of recoverable handler "findings.audit" recorded 6 finding(s): 1 DATA_LOSS "orphan", 3 ERROR "missing-row", 2 WARNING "stale"; ' +
        `worst: DATA_LOSS "orphan" on ${run.id}/orphan/0`,
    );
    // Within the rule's window, the next run's findings are held back and counted, as any occurrence is.
    await runToEnd('findings.audit', { found: [['stale', 'WARNING', 2]] });
    await evaluate();
    expect(await sent(rule.id)).toHaveLength(1);
    const { rows } = await t.query(`select suppressed, occurrences from alert_states where rule_id = $1`, [rule.id]);
    expect(rows[0]).toMatchObject({ suppressed: 2, occurrences: 8 });
  });
});

describe('a recoverable handler opted out of alerts', () => {
  it('raises no RUN_FAILED, FINDING or NO_SUCCESS alert, while the same failures of another handler do; the catalogue says it opted out', async () => {
    const failed = await t.service.createAlertRule(t.actor, { name: 'runs', condition: 'RUN_FAILED', webhookEndpointId: webhookId });
    const found = await t.service.createAlertRule(t.actor, {
      name: 'all findings',
      condition: 'FINDING',
      minSeverity: 'INFO',
      webhookEndpointId: webhookId,
    });
    const silent = await t.service.createAlertRule(t.actor, {
      name: 'silent',
      condition: 'NO_SUCCESS',
      noSuccessMs: 1000,
      // A name no run ever completed: silent since the rule exists (an hour, below), as findings.quiet is.
      handlerNames: ['findings.quiet', 'findings.never'],
      webhookEndpointId: webhookId,
    });
    // Both handlers fail with findings.
    await t.query(`update alert_rules set created_at = now() - interval '1 hour' where id = $1`, [silent.id]);
    await runToEnd('findings.quiet', { found: [['drift', 'ERROR', 2]], fail: true });
    await runToEnd('findings.audit', { found: [['drift', 'ERROR', 1]], fail: true });
    await evaluate();
    const subjects = async (ruleId: string) => (await sent(ruleId)).map((n) => n.subject_name);
    expect(await subjects(failed.id)).toEqual(['findings.audit']);
    expect(await subjects(found.id)).toEqual(['findings.audit']);
    expect(await subjects(silent.id)).toEqual(['findings.never']);

    const catalogue = await t.service.handlers(t.actor, { kind: 'RECOVERABLE' });
    expect(catalogue.map((c) => [c.name, c.alertsOptOut])).toEqual([
      ['findings.audit', false],
      ['findings.quiet', true],
    ]);
    const g = createTestGateway(t);
    const res = await g.gql(`{ handlerConnection(kind: RECOVERABLE, name: "findings.quiet") { edges { node { name alertsOptOut } } } }`);
    expect(res.errors).toBeUndefined();
    expect(res.data.handlerConnection.edges).toEqual([{ node: { name: 'findings.quiet', alertsOptOut: true } }]);
  });
});
