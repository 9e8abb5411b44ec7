/**
 * Finding executions: by their job's name or idempotency key (a prefix) and by text in their last
 * error (anywhere in it), alone or with the other filters, in lists and in bulk actions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
const executionOf: Record<string, string> = {};

/** The job's one execution ends FAILED with this error (as a worker would leave it), or stays PENDING with it (a retry waits). */
async function failWith(name: string, error: string, status: 'FAILED' | 'PENDING' = 'FAILED') {
  await t.query(`update executions set status = $2, last_error = $3, attempt_count = 1 where id = $1`, [executionOf[name], status, error]);
}

beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  await t.service.registerEndpoint(t.actor, { name: 'search.billing', kind: 'HANDLER', handlerName: 'billing' });
  await t.service.registerEndpoint(t.actor, { name: 'search.mail', kind: 'HANDLER', handlerName: 'mail' });
  const make = async (name: string, endpointName: string, idempotencyKey?: string) => {
    const { job } = await t.service.createJob(t.actor, {
      endpointName,
      kind: 'DELAYED',
      runAt: new Date(Date.now() + 3_600_000),
      name,
      idempotencyKey,
    });
    executionOf[name] = (await t.query('select id from executions where job_id = $1', [job.id])).rows[0].id;
  };
  await make('Invoice run', 'search.billing', 'inv-2026-12');
  await make('invoice_reminders', 'search.billing');
  await make('Welcome mail', 'search.mail', 'welcome-7');
  await make('Digest mail', 'search.mail');
  await failWith('Invoice run', 'HTTP 504: Gateway TIMEOUT from billing-api');
  await failWith('invoice_reminders', 'connect ECONNREFUSED 10.0.0.7:443');
  await failWith('Welcome mail', 'handler threw: timeout after 30000 ms (100%_done)', 'PENDING');
});
afterAll(() => t.close());

const names = async (filter: string) => {
  const res = await g.gql(`{ executions(first: 50, filter: ${filter}) { nodes { job { name } lastError } totalCount } }`);
  expect(res.errors).toBeUndefined();
  const list = res.data.executions as { nodes: { job: { name: string } }[]; totalCount: number };
  return { names: list.nodes.map((n) => n.job.name).sort(), totalCount: list.totalCount };
};

describe('searching executions', () => {
  it("find them by their job's name prefix in any case, or by its idempotency key prefix", async () => {
    expect(await names('{ search: "INVOICE" }')).toEqual({ names: ['Invoice run', 'invoice_reminders'], totalCount: 2 });
    expect(await names('{ search: "welcome-" }')).toEqual({ names: ['Welcome mail'], totalCount: 1 });
    expect((await names('{ search: "mail" }')).names).toEqual([]); // a prefix, not a substring
    expect((await names('{ search: "invoice_" }')).names).toEqual(['invoice_reminders']); // _ is itself
  });

  it('find them by text anywhere in the last error, in any case, taking % and _ literally', async () => {
    expect(await names('{ errorContains: "timeout" }')).toEqual({ names: ['Invoice run', 'Welcome mail'], totalCount: 2 });
    expect((await names('{ errorContains: "econnrefused 10.0" }')).names).toEqual(['invoice_reminders']);
    expect((await names('{ errorContains: "0%_d" }')).names).toEqual(['Welcome mail']);
    expect((await names('{ errorContains: "0%x" }')).names).toEqual([]);
    expect((await names('{ errorContains: "no such error" }')).names).toEqual([]);
  });

  it('combine both with the other filters, every condition holding', async () => {
    const billing = (await g.gql('{ endpoint(name: "search.billing") { id } }')).data.endpoint.id;
    expect((await names(`{ errorContains: "timeout", endpointId: "${billing}" }`)).names).toEqual(['Invoice run']);
    expect((await names('{ errorContains: "timeout", statuses: [PENDING] }')).names).toEqual(['Welcome mail']);
    expect((await names('{ errorContains: "timeout", search: "welcome" }')).names).toEqual(['Welcome mail']);
    expect((await names('{ errorContains: "timeout", search: "digest" }')).names).toEqual([]);
  });

  it('page through the matches, newest first, with the cursor', async () => {
    const first = await g.gql(
      '{ executions(first: 1, filter: { errorContains: "timeout" }) { nodes { id } pageInfo { endCursor hasNextPage } } }',
    );
    expect(first.data.executions.nodes).toEqual([{ id: executionOf['Welcome mail'] }]);
    expect(first.data.executions.pageInfo.hasNextPage).toBe(true);
    const after = first.data.executions.pageInfo.endCursor;
    const next = await g.gql(
      `{ executions(first: 5, after: "${after}", filter: { errorContains: "timeout" }) { nodes { id } pageInfo { hasNextPage } } }`,
    );
    expect(next.data.executions).toEqual({ nodes: [{ id: executionOf['Invoice run'] }], pageInfo: { hasNextPage: false } });
  });

  it('refuse error text under 3 characters and an empty search with VALIDATION_FAILED naming the field', async () => {
    const short = await g.gql('{ executions(filter: { errorContains: "ti" }) { nodes { id } } }');
    expect(short.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(JSON.stringify(short.errors![0]!.extensions!.issues)).toContain('errorContains');
    const empty = await g.gql('{ executions(filter: { search: "" }) { nodes { id } } }');
    expect(JSON.stringify(empty.errors![0]!.extensions!.issues)).toContain('search');
  });

  it('act in bulk on what a search matched, and on nothing else', async () => {
    const res = await g.gql('mutation { cancelExecutions(filter: { errorContains: "TIMEOUT" }) { matched changed } }');
    expect(res.data.cancelExecutions).toEqual({ matched: 1, changed: 1 }); // Welcome mail: the one PENDING match
    const rows = await t.query(`select id from executions where status = 'CANCELLED'`);
    expect(rows.rows.map((r: { id: string }) => r.id)).toEqual([executionOf['Welcome mail']]);
  });

  it('give the same newest-first page when more than 2,000 executions match (the index walk, not the sort)', async () => {
    // 2,100 more failures of "Digest mail", a minute apart, newest last.
    await t.query(
      `insert into executions (workspace_id, job_id, endpoint_id, scheduled_for, run_after, max_attempts, status, last_error, created_at)
       select e.workspace_id, e.job_id, e.endpoint_id, e.scheduled_for + i * interval '1 minute', e.run_after, 1, 'FAILED',
              'smtp timeout #' || i, now() + i * interval '1 millisecond'
       from executions e, generate_series(1, 2100) i where e.id = $1`,
      [executionOf['Digest mail']],
    );
    const res = await g.gql('{ executions(first: 3, filter: { errorContains: "timeout" }) { nodes { lastError } totalCount } }');
    expect(res.data.executions.nodes.map((n: { lastError: string }) => n.lastError)).toEqual([
      'smtp timeout #2100',
      'smtp timeout #2099',
      'smtp timeout #2098',
    ]);
    expect(res.data.executions.totalCount).toBeGreaterThan(2000);
    const byJob = await g.gql('{ executions(first: 2, filter: { search: "digest" }) { nodes { lastError } totalCount } }');
    expect(byJob.data.executions).toEqual({
      nodes: [{ lastError: 'smtp timeout #2100' }, { lastError: 'smtp timeout #2099' }],
      totalCount: 2101,
    });
  });

  it('end the list, rather than search on, when no match is left after the cursor', async () => {
    const last = await g.gql('{ executions(first: 50, filter: { search: "invoice" }) { pageInfo { endCursor } } }');
    const after = last.data.executions.pageInfo.endCursor;
    const next = await g.gql(
      `{ executions(first: 5, after: "${after}", filter: { search: "invoice" }) { nodes { id } pageInfo { hasNextPage } } }`,
    );
    expect(next.data.executions).toEqual({ nodes: [], pageInfo: { hasNextPage: false } });
  });
});
