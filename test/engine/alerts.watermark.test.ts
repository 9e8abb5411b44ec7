/**
 * The evaluator reads events only below the stable watermark: an event whose transaction is
 * still open when a later one commits is evaluated once it commits, never skipped.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { evaluateAlerts } from '../../src/service/engine/alerts/evaluator.js';
import { createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(() => t.close());

async function pendingJob(name: string) {
  const { job } = await t.service.createJob(t.actor, {
    endpointName: 'wm.target',
    kind: 'DELAYED',
    name,
    runAt: new Date(Date.now() + 3_600_000),
  });
  return job;
}
/** Ends the job's execution FAILED, as a worker's completion does (the events trigger writes the row). */
const FAIL = `update executions set status = 'FAILED', attempt_count = 1, finished_at = now(), last_error = 'HTTP 500' where job_id = $1`;

it('evaluates an event that committed after a later one, without skipping it', async () => {
  await t.service.registerEndpoint(t.actor, { name: 'wm.target', kind: 'HANDLER', handlerName: 'wm' });
  const rule = await t.service.createAlertRule(t.actor, { name: 'wm', condition: 'EXECUTION_FAILED', email: true });
  const early = await pendingJob('early');
  const late = await pendingJob('late');
  const slow = await t.database.pool.connect();
  try {
    // The early failure takes its event id first, and stays uncommitted...
    await slow.query('begin');
    await slow.query(FAIL, [early.id]);
    // ...while the late one, with a higher id, commits.
    await t.query(FAIL, [late.id]);
    await evaluateAlerts(t.database.pool, t.actor.workspaceId, { settleWaitMs: 50 });
    await evaluateAlerts(t.database.pool, t.actor.workspaceId, { settleWaitMs: 50 });
    // Nothing past the open writer's id was taken as settled.
    expect((await t.query(`select count(*)::int as n from alert_notifications where rule_id = $1`, [rule.id])).rows[0].n).toBe(0);
    await slow.query('commit');
  } finally {
    slow.release();
  }
  await evaluateAlerts(t.database.pool, t.actor.workspaceId);
  const { rows } = await t.query(`select subject_id from alert_notifications where rule_id = $1 order by subject_name`, [rule.id]);
  expect(rows.map((r) => r.subject_id)).toEqual([early.id, late.id]);
});
