/**
 * The role matrix: every mutation of the schema with each role. A mutation added without a row
 * here fails the suite. "allowed" means the role passes the guard (the call may still fail for
 * another reason, e.g. CONFLICT); "refused" means FORBIDDEN, and nothing changes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../../src/schema/index.js';
import type { Actor } from '../../src/service/kernel/actor.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

type Role = 'ADMIN' | 'OPERATOR' | 'VIEWER';
let t: TestDb;
let g: TestGateway;
const actors = {} as Record<Role, Actor>;
/** Per role: things created by that role's key (by ADMIN for VIEWER, who cannot create). */
const own = {} as Record<
  Role,
  {
    endpoint: string;
    job: string;
    execution: string;
    spec: string;
    key: string;
    run: string;
    rule: string;
    state: string;
    silence: string;
    batch: string;
  }
>;

beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  const admin = await t.service.authenticate((await t.service.bootstrapKey('default', 'ADMIN', 'matrix admin')).key);
  actors.ADMIN = admin;
  for (const role of ['OPERATOR', 'VIEWER'] as const) {
    actors[role] = await t.service.authenticate((await t.service.createApiKey(admin, { name: role, role })).key);
  }
  for (const role of ['ADMIN', 'OPERATOR', 'VIEWER'] as const) {
    const maker = role === 'VIEWER' ? admin : actors[role];
    const spec = await t.service.createPayloadSpec(maker, { name: `m.${role.toLowerCase()}-spec`, jsonSchema: true });
    const endpoint = await t.service.registerEndpoint(maker, { name: `m.${role.toLowerCase()}-ep`, kind: 'HANDLER', handlerName: 'h' });
    const { job } = await t.service.createJob(maker, { endpointId: endpoint.id, kind: 'DELAYED', runAt: new Date(Date.now() + 3_600_000) });
    const execution = (await t.service.executions(maker, { jobId: job.id })).edges[0]!.node.id;
    const key = (await t.service.createApiKey(admin, { name: `victim of ${role}`, role: 'VIEWER' })).apiKey.id;
    const run = (await t.service.triggerRun(maker, { force: true, name: `m.${role.toLowerCase()}-scan` })).run.id;
    const rule = (
      await t.service.createAlertRule(admin, { name: `m.${role.toLowerCase()}-rule`, condition: 'EXECUTION_FAILED', email: true })
    ).id;
    // A firing state of that rule, as the evaluator writes it (no worker runs here), and a silence of it.
    const state = (
      await t.query(
        `insert into alert_states (rule_id, subject_key, workspace_id, firing, first_seen_at, last_seen_at, occurrences)
         values ($1, 'job:' || $2::text, $3, true, now(), now(), 1) returning id`,
        [rule, job.id, admin.workspaceId],
      )
    ).rows[0].id as string;
    const silence = (await t.service.silenceAlerts(admin, { ruleId: rule, durationMs: 3_600_000 })).id;
    const batch = (await t.service.createBatch(maker, { open: true })).batch.id;
    own[role] = { endpoint: endpoint.id, job: job.id, execution, spec: spec.id, key, run, rule, state, silence, batch };
  }
});
afterAll(() => t.close());

type Case = { query: string; vars: (o: (typeof own)[Role], role: Role) => Record<string, unknown>; allowed: Role[] };
const ALL: Role[] = ['ADMIN', 'OPERATOR'];
const ADMIN_ONLY: Role[] = ['ADMIN'];

const cases: Record<string, Case> = {
  createPayloadSpec: {
    query: 'mutation ($n: String!) { createPayloadSpec(input: { name: $n, jsonSchema: true }) { id } }',
    vars: (_o, r) => ({ n: `p.${r.toLowerCase()}-new` }),
    allowed: ALL,
  },
  updatePayloadSpec: {
    query: 'mutation ($id: ID!) { updatePayloadSpec(input: { id: $id, description: "d" }) { id } }',
    vars: (o) => ({ id: o.spec }),
    allowed: ALL,
  },
  setConfig: {
    query: 'mutation ($n: String!) { setConfig(input: { name: $n, entries: [] }) { id } }',
    vars: (_o, r) => ({ n: `c.${r.toLowerCase()}` }),
    allowed: ALL,
  },
  registerEndpoint: {
    query: 'mutation ($n: String!) { registerEndpoint(input: { name: $n, kind: HANDLER, handlerName: "h" }) { id } }',
    vars: (_o, r) => ({ n: `e.${r.toLowerCase()}-new` }),
    allowed: ALL,
  },
  updateEndpoint: {
    query: 'mutation ($id: ID!) { updateEndpoint(input: { id: $id, description: "d" }) { id } }',
    vars: (o) => ({ id: o.endpoint }),
    allowed: ALL,
  },
  pauseEndpoint: { query: 'mutation ($id: ID!) { pauseEndpoint(id: $id) { id } }', vars: (o) => ({ id: o.endpoint }), allowed: ALL },
  resumeEndpoint: { query: 'mutation ($id: ID!) { resumeEndpoint(id: $id) { id } }', vars: (o) => ({ id: o.endpoint }), allowed: ALL },
  archiveEndpoint: { query: 'mutation ($id: ID!) { archiveEndpoint(id: $id) { id } }', vars: (o) => ({ id: o.endpoint }), allowed: ALL },
  createJob: {
    query: 'mutation ($e: ID) { createJob(input: { endpointId: $e, kind: DELAYED, runAt: "2099-01-01T00:00:00Z" }) { created } }',
    vars: (o) => ({ e: o.endpoint }),
    allowed: ALL,
  },
  createBatch: {
    query:
      'mutation ($e: ID) { createBatch(input: { jobs: [{ endpointId: $e, kind: DELAYED, runAt: "2099-01-01T00:00:00Z" }] }) { created } }',
    vars: (o) => ({ e: o.endpoint }),
    allowed: ALL,
  },
  closeBatch: { query: 'mutation ($id: ID!) { closeBatch(id: $id) { id } }', vars: (o) => ({ id: o.batch }), allowed: ALL },
  cancelBatch: { query: 'mutation ($id: ID!) { cancelBatch(id: $id) { cancelledJobs } }', vars: (o) => ({ id: o.batch }), allowed: ALL },
  createJobs: {
    query:
      'mutation ($e: ID) { createJobs(input: { jobs: [{ endpointId: $e, kind: DELAYED, runAt: "2099-01-01T00:00:00Z" }] }) { results { created } } }',
    vars: (o) => ({ e: o.endpoint }),
    allowed: ALL,
  },
  updateJob: {
    query: 'mutation ($id: ID!) { updateJob(input: { id: $id, name: "n" }) { id } }',
    vars: (o) => ({ id: o.job }),
    allowed: ALL,
  },
  pauseJob: { query: 'mutation ($id: ID!) { pauseJob(id: $id) { id } }', vars: (o) => ({ id: o.job }), allowed: ALL },
  resumeJob: { query: 'mutation ($id: ID!) { resumeJob(id: $id) { id } }', vars: (o) => ({ id: o.job }), allowed: ALL },
  triggerJob: {
    query: 'mutation ($id: ID!) { triggerJob(input: { id: $id, force: true }) { created } }',
    vars: (o) => ({ id: o.job }),
    allowed: ALL,
  },
  cancelExecution: { query: 'mutation ($id: ID!) { cancelExecution(id: $id) { id } }', vars: (o) => ({ id: o.execution }), allowed: ALL },
  retryExecution: { query: 'mutation ($id: ID!) { retryExecution(id: $id) { id } }', vars: (o) => ({ id: o.execution }), allowed: ALL },
  retryExecutions: { query: 'mutation { retryExecutions(limit: 5) { matched } }', vars: () => ({}), allowed: ALL },
  cancelExecutions: {
    query: 'mutation ($j: ID) { cancelExecutions(filter: { jobId: $j }) { matched } }',
    vars: (o) => ({ j: o.job }),
    allowed: ALL,
  },
  pauseJobs: { query: 'mutation ($id: ID!) { pauseJobs(ids: [$id]) { changed } }', vars: (o) => ({ id: o.job }), allowed: ALL },
  resumeJobs: { query: 'mutation ($id: ID!) { resumeJobs(ids: [$id]) { changed } }', vars: (o) => ({ id: o.job }), allowed: ALL },
  cancelJobs: { query: 'mutation ($id: ID!) { cancelJobs(ids: [$id]) { changed } }', vars: (o) => ({ id: o.job }), allowed: ALL },
  setJobAlertsOptOut: {
    query: 'mutation ($id: ID!) { setJobAlertsOptOut(input: { jobId: $id, optOut: true }) { alertsOptOut } }',
    vars: (o) => ({ id: o.job }),
    allowed: ALL,
  },
  cancelJob: { query: 'mutation ($id: ID!) { cancelJob(id: $id) { cancelledExecutions } }', vars: (o) => ({ id: o.job }), allowed: ALL },
  triggerRun: {
    query: 'mutation ($n: String!) { triggerRun(input: { name: $n, force: true }) { outcome } }',
    vars: (_o, r) => ({ n: `scan.${r.toLowerCase()}` }),
    allowed: ALL,
  },
  cancelRun: { query: 'mutation ($id: ID!) { cancelRun(id: $id) { id } }', vars: (o) => ({ id: o.run }), allowed: ALL },
  // Interval handlers are installation-wide: ADMIN only. (No worker has "nightly": an allowed call gets NOT_FOUND.)
  triggerHandler: { query: 'mutation { triggerHandler(input: { name: "nightly" }) { outcome } }', vars: () => ({}), allowed: ADMIN_ONLY },
  // Alert rules say who hears of what: ADMIN only.
  createAlertRule: {
    query: 'mutation ($n: String!) { createAlertRule(input: { name: $n, condition: EXECUTION_FAILED, email: true }) { id } }',
    vars: (_o, r) => ({ n: `a.${r.toLowerCase()}` }),
    allowed: ADMIN_ONLY,
  },
  updateAlertRule: {
    query: 'mutation ($id: ID!) { updateAlertRule(input: { id: $id, rateLimitMs: 60000 }) { id } }',
    vars: (o) => ({ id: o.rule }),
    allowed: ADMIN_ONLY,
  },
  deleteAlertRule: { query: 'mutation ($id: ID!) { deleteAlertRule(id: $id) { id } }', vars: (o) => ({ id: o.rule }), allowed: ADMIN_ONLY },
  // Triage is the on-call's (OPERATOR too); editing the rules stays ADMIN's.
  acknowledgeAlertState: {
    query: 'mutation ($id: ID!) { acknowledgeAlertState(id: $id) { status } }',
    vars: (o) => ({ id: o.state }),
    allowed: ALL,
  },
  silenceAlerts: {
    query: 'mutation ($id: ID!) { silenceAlerts(input: { ruleId: $id, durationMs: 600000 }) { id } }',
    vars: (o) => ({ id: o.rule }),
    allowed: ALL,
  },
  unsilenceAlerts: {
    query: 'mutation ($id: ID!) { unsilenceAlerts(id: $id) { id } }',
    vars: (o) => ({ id: o.silence }),
    allowed: ALL,
  },
  // How long history is kept is the workspace's policy: ADMIN only.
  setRetention: { query: 'mutation { setRetention(input: { auditDays: 400 }) { auditDays } }', vars: () => ({}), allowed: ADMIN_ONLY },
  pruneHistory: { query: 'mutation { pruneHistory(input: { maxBatches: 1 }) { complete } }', vars: () => ({}), allowed: ADMIN_ONLY },
  createApiKey: { query: 'mutation { createApiKey(input: { name: "k", role: VIEWER }) { key } }', vars: () => ({}), allowed: ADMIN_ONLY },
  revokeApiKey: { query: 'mutation ($id: ID!) { revokeApiKey(id: $id) { id } }', vars: (o) => ({ id: o.key }), allowed: ADMIN_ONLY },
  // Any key may open a live stream, so any key may mint the ticket that opens one from a browser.
  createSubscriptionTicket: {
    query: 'mutation { createSubscriptionTicket { expiresAt } }',
    vars: () => ({}),
    allowed: ['ADMIN', 'OPERATOR', 'VIEWER'],
  },
  updateWorkspace: {
    query: 'mutation ($n: String!) { updateWorkspace(input: { name: $n }) { id } }',
    vars: (_o, r) => ({ n: `renamed by ${r}` }),
    allowed: ['ADMIN'],
  },
  // Installation admins only: no workspace ADMIN key may.
  createWorkspace: {
    query: 'mutation ($s: String!) { createWorkspace(input: { slug: $s, name: "x" }) { workspace { id } } }',
    vars: (_o, r) => ({ s: `ws-${r.toLowerCase()}` }),
    allowed: [],
  },
};

describe('role matrix', () => {
  it('has a row for every mutation', () => {
    expect(Object.keys(schema.getMutationType()!.getFields()).filter((f) => !(f in cases))).toEqual([]);
  });

  for (const [field, c] of Object.entries(cases)) {
    for (const role of ['ADMIN', 'OPERATOR', 'VIEWER'] as const) {
      const verdict = c.allowed.includes(role) ? 'allowed' : 'refused';
      it(`${field} as ${role}: ${verdict}`, async () => {
        const before = (await t.query('select count(*)::int as n from audit_log where result_code = $1', ['OK'])).rows[0].n;
        const res = await g.gql(c.query, c.vars(own[role], role), actors[role]);
        const code = res.errors?.[0]?.extensions?.code;
        if (verdict === 'allowed') {
          expect(code, JSON.stringify(res.errors)).not.toBe('FORBIDDEN');
        } else {
          expect(code).toBe('FORBIDDEN');
          // Refused: nothing changed, and the refusal is on record.
          expect((await t.query('select count(*)::int as n from audit_log where result_code = $1', ['OK'])).rows[0].n).toBe(before);
          const last = (await t.query('select action, result_code, actor_key_id from audit_log order by id desc limit 1')).rows[0];
          expect(last).toMatchObject({ result_code: 'FORBIDDEN', actor_key_id: actors[role].keyId });
        }
      });
    }
  }
});
