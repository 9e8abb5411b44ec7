/**
 * Bulk actions over GraphQL: the dead-letter view's "retry all that match", cancel many, pause
 * and resume many. Each item goes through its single action; the whole is bounded and audited.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnrecoverableError } from '../../src/service/engine/handlers.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, eventually, type EngineHarness } from '../support/engine.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
let h: EngineHarness;
let healthy = false;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  h = engineHarness(t);
  h.handle('fragile', () => {
    if (!healthy) throw new UnrecoverableError('down');
  });
  await t.service.registerEndpoint(t.actor, { name: 'bulk.fragile', kind: 'HANDLER', handlerName: 'fragile', maxAttempts: 1 });
  await t.service.registerEndpoint(t.actor, { name: 'bulk.idle', kind: 'HANDLER', handlerName: 'nobody' });
  await h.worker();
});
afterAll(async () => {
  await h.stopAll();
  await t.close();
});

const count = async (sql: string, values: unknown[] = []) => (await t.query(sql, values)).rows[0].n as number;

describe('bulk actions', () => {
  it('re-drives every FAILED execution matching the filter, at most `limit` a call, until none is left', async () => {
    const endpointId = (await g.gql('{ endpoint(name: "bulk.fragile") { id } }')).data.endpoint.id;
    for (let i = 0; i < 5; i++) await t.service.createJob(t.actor, { endpointName: 'bulk.fragile', kind: 'IMMEDIATE', input: { i } });
    await eventually(
      async () => (await count(`select count(*)::int as n from executions where status = 'FAILED'`)) === 5,
      10_000,
      'five failures',
    );
    healthy = true;
    const first = await g.gql(
      `mutation { retryExecutions(filter: { endpointId: "${endpointId}" }, limit: 3) { matched changed skipped { id } more } }`,
    );
    expect(first.data.retryExecutions).toEqual({ matched: 3, changed: 3, skipped: [], more: true });
    const rest = await g.gql(
      `mutation { retryExecutions(filter: { endpointId: "${endpointId}", statuses: [FAILED, PENDING] }) { matched changed more } }`,
    );
    expect(rest.data.retryExecutions).toEqual({ matched: 2, changed: 2, more: false });
    await eventually(
      async () => (await count(`select count(*)::int as n from executions where status = 'SUCCEEDED'`)) === 5,
      10_000,
      'five successes',
    );
    // One audit row for each selection, one per item.
    expect(await count(`select count(*)::int as n from audit_log where action = 'executions.retry-many' and result_code = 'OK'`)).toBe(2);
    expect(await count(`select count(*)::int as n from audit_log where action = 'execution.retry' and result_code = 'OK'`)).toBe(5);
  });

  it("cancels the pending executions matching a filter and says which it left, with the single action's code", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { job } = await t.service.createJob(t.actor, {
        endpointName: 'bulk.idle',
        kind: 'DELAYED',
        runAt: new Date(Date.now() + 3_600_000),
      });
      ids.push(job.id);
    }
    const res = await g.gql(`mutation { cancelExecutions(filter: { jobId: "${ids[0]}" }) { matched changed } }`);
    expect(res.data.cancelExecutions).toEqual({ matched: 1, changed: 1 });
    const again = await g.gql(`mutation { cancelExecutions(filter: { jobId: "${ids[0]}" }) { matched changed } }`);
    expect(again.data.cancelExecutions).toEqual({ matched: 0, changed: 0 });
    // Pause two jobs and a retired one: the retired one is skipped with RETIRED, the others change.
    await t.service.cancelJob(t.actor, ids[2]!);
    const paused = await g.gql(
      `mutation { pauseJobs(ids: ["${ids[0]}", "${ids[1]}", "${ids[2]}"]) { matched changed skipped { id code } } }`,
    );
    expect(paused.data.pauseJobs.changed).toBe(2);
    expect(paused.data.pauseJobs.skipped).toEqual([{ id: ids[2], code: 'RETIRED' }]);
    expect(await count(`select count(*)::int as n from jobs where id = any($1) and status = 'PAUSED'`, [ids])).toBe(2);
    const resumed = await g.gql(`mutation { resumeJobs(ids: ["${ids[0]}", "${ids[1]}"]) { changed } }`);
    expect(resumed.data.resumeJobs.changed).toBe(2);
  });

  it('refuses a limit past 1000 or an empty id list with VALIDATION_FAILED, changing nothing', async () => {
    const before = await count('select count(*)::int as n from executions where status = $1', ['PENDING']);
    const big = await g.gql('mutation { cancelExecutions(limit: 5000) { matched } }');
    expect(big.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['limit'] }] });
    const none = await g.gql('mutation { pauseJobs(ids: []) { matched } }');
    expect(none.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(await count('select count(*)::int as n from executions where status = $1', ['PENDING'])).toBe(before);
  });
});
