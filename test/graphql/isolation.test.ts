/**
 * Workspace isolation over every root field: with workspace B's credentials and workspace A's
 * ids, nothing of A is read or changed, and "not found" looks the same as for an id that exists
 * nowhere. A root field added to the schema without a probe here fails the suite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../../src/schema/index.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
const a: Record<string, string> = {};
const NOWHERE = '00000000-0000-4000-8000-000000000000';

beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t, { live: true });
  const spec = await t.service.createPayloadSpec(t.actor, { name: 'a.spec', jsonSchema: { type: 'object' } });
  const config = await t.service.setConfig(t.actor, { name: 'a.config', entries: [{ key: 'k', value: 'a-secret-ish' }] });
  const endpoint = await t.service.registerEndpoint(t.actor, {
    name: 'a.endpoint',
    kind: 'HANDLER',
    handlerName: 'h',
    payloadSpecId: spec.id,
    configId: config.id,
  });
  const { job } = await t.service.createJob(t.actor, { endpointId: endpoint.id, kind: 'IMMEDIATE', input: { mine: 'A' } });
  const execution = (await t.service.executions(t.actor, { jobId: job.id })).edges[0]!.node;
  const key = await t.service.createApiKey(t.actor, { name: 'a key', role: 'OPERATOR' });
  const run = (await t.service.triggerRun(t.actor, { force: true, name: 'a.scan' })).run;
  await t.query(`insert into findings (workspace_id, run_id, kind, severity, resource_id) values ($1, $2, 'k', 'INFO', 'r-1')`, [
    t.actor.workspaceId,
    run.id,
  ]);
  // A live worker with A's recoverable handler and an interval handler: the catalogue is shared, A's run is not.
  await t.query(
    `insert into workers (id, host, pid, stale_ms, handlers) values ('w-a', 'h', 1, 600000, '[{"kind":"RECOVERABLE","name":"a.scan","everyMs":60000,"workspace":"default"},{"kind":"INTERVAL","name":"a.tick","everyMs":60000}]')`,
  );
  await t.query(`insert into interval_handlers (name, every_ms, next_due_at) values ('a.tick', 60000, now() + interval '1 hour')`);
  await t.query(
    `insert into run_schedules (workspace_id, name, every_ms, next_due_at, last_tick_run_id) values ($1, 'a.scan', 60000, now(), $2)`,
    [t.actor.workspaceId, run.id],
  );
  const rule = await t.service.createAlertRule(t.actor, { name: 'a.rule', condition: 'EXECUTION_FAILED', email: true, jobIds: [job.id] });
  const alert = (
    await t.query(
      `insert into alert_notifications (workspace_id, rule_id, condition, kind, subject_type, subject_key, subject_id, window_start, first_seen_at, last_seen_at, occurrences, summary)
     values ($1, $2, 'EXECUTION_FAILED', 'FIRING', 'JOB', 'job:' || $3::text, $3::uuid, now(), now(), now(), 1, 'A failed') returning id`,
      [t.actor.workspaceId, rule.id, job.id],
    )
  ).rows[0].id as string;
  const state = (
    await t.query(
      `insert into alert_states (rule_id, subject_key, workspace_id, firing, first_seen_at, last_seen_at, occurrences)
       values ($1, 'job:' || $2::text, $3, true, now(), now(), 1) returning id`,
      [rule.id, job.id, t.actor.workspaceId],
    )
  ).rows[0].id as string;
  const silence = await t.service.silenceAlerts(t.actor, { ruleId: rule.id, subjectType: 'JOB', subjectId: job.id, durationMs: 3_600_000 });
  const batch = await t.service.createBatch(t.actor, {
    open: true,
    jobs: [{ endpointId: endpoint.id, kind: 'IMMEDIATE', input: { mine: 'A' } }],
  });
  Object.assign(a, {
    batch: batch.batch.id,
    spec: spec.id,
    config: config.id,
    endpoint: endpoint.id,
    job: job.id,
    execution: execution.id,
    apiKey: key.apiKey.id,
    run: run.id,
    rule: rule.id,
    alert,
    state,
    silence: silence.id,
  });
});
afterAll(async () => {
  await g.close();
  await t.close();
});

type Probe = {
  /** The operation, with `$id` standing for an id of workspace A (or of nowhere). */
  query: string;
  id?: keyof typeof a;
  /** Whether B must get NOT_FOUND (id-addressed fields), or an answer without A's data (lists). */
  expect: 'NOT_FOUND' | 'NO_A_DATA';
};

const probes: Record<string, Probe> = {
  workspace: { query: `{ workspace { id slug } }`, expect: 'NO_A_DATA' },
  endpoints: { query: `{ endpoints(includeArchived: true) { nodes { id name } } }`, expect: 'NO_A_DATA' },
  endpoint: { query: `query ($id: ID) { endpoint(id: $id) { id } }`, id: 'endpoint', expect: 'NOT_FOUND' },
  payloadSpecs: { query: `{ payloadSpecs { nodes { id name } } }`, expect: 'NO_A_DATA' },
  payloadSpec: { query: `query ($id: ID!) { payloadSpec(id: $id) { id } }`, id: 'spec', expect: 'NOT_FOUND' },
  configs: { query: `{ configs { nodes { id name entries { value } } } }`, expect: 'NO_A_DATA' },
  jobs: { query: `query ($id: ID) { jobs(filter: { endpointId: $id }) { nodes { id } } }`, id: 'endpoint', expect: 'NO_A_DATA' },
  job: { query: `query ($id: ID!) { job(id: $id) { id } }`, id: 'job', expect: 'NOT_FOUND' },
  batch: { query: `query ($id: ID!) { batch(id: $id) { id total } }`, id: 'batch', expect: 'NOT_FOUND' },
  batches: { query: `{ batches { nodes { id total jobs { nodes { id } } } } }`, expect: 'NO_A_DATA' },
  createBatch: {
    query: `mutation ($id: ID) { createBatch(input: { jobs: [{ endpointId: $id, kind: IMMEDIATE }] }) { created } }`,
    id: 'endpoint',
    expect: 'NOT_FOUND',
  },
  closeBatch: { query: `mutation ($id: ID!) { closeBatch(id: $id) { id } }`, id: 'batch', expect: 'NOT_FOUND' },
  cancelBatch: { query: `mutation ($id: ID!) { cancelBatch(id: $id) { cancelledJobs } }`, id: 'batch', expect: 'NOT_FOUND' },
  executions: { query: `query ($id: ID) { executions(jobId: $id) { nodes { id } } }`, id: 'job', expect: 'NO_A_DATA' },
  execution: { query: `query ($id: ID!) { execution(id: $id) { id } }`, id: 'execution', expect: 'NOT_FOUND' },
  viewer: { query: `{ viewer { role workspace { id slug } apiKey { id name } } }`, expect: 'NO_A_DATA' },
  executionStats: {
    query: `{ executionStats(windowMinutes: 60) { byEndpoint { endpointId endpointName pending running failed } perMinute { minute } } }`,
    expect: 'NO_A_DATA',
  },
  cronPreview: { query: `{ cronPreview(expression: "0 * * * *", count: 1) }`, expect: 'NO_A_DATA' },
  registerEndpoint: {
    query: `mutation ($id: ID) { registerEndpoint(input: { name: "b.endpoint", kind: HANDLER, handlerName: "h", payloadSpecId: $id }) { id } }`,
    id: 'spec',
    expect: 'NOT_FOUND',
  },
  updateEndpoint: {
    query: `mutation ($id: ID!) { updateEndpoint(input: { id: $id, description: "B was here" }) { id } }`,
    id: 'endpoint',
    expect: 'NOT_FOUND',
  },
  archiveEndpoint: { query: `mutation ($id: ID!) { archiveEndpoint(id: $id) { id } }`, id: 'endpoint', expect: 'NOT_FOUND' },
  pauseEndpoint: { query: `mutation ($id: ID!) { pauseEndpoint(id: $id) { id } }`, id: 'endpoint', expect: 'NOT_FOUND' },
  resumeEndpoint: { query: `mutation ($id: ID!) { resumeEndpoint(id: $id) { id } }`, id: 'endpoint', expect: 'NOT_FOUND' },
  createPayloadSpec: { query: `mutation { createPayloadSpec(input: { name: "a.spec", jsonSchema: true }) { id } }`, expect: 'NO_A_DATA' },
  updatePayloadSpec: {
    query: `mutation ($id: ID!) { updatePayloadSpec(input: { id: $id, jsonSchema: false }) { id } }`,
    id: 'spec',
    expect: 'NOT_FOUND',
  },
  setConfig: { query: `mutation { setConfig(input: { name: "a.config", entries: [] }) { id entries { key } } }`, expect: 'NO_A_DATA' },
  createJob: {
    query: `mutation ($id: ID) { createJob(input: { endpointId: $id, kind: IMMEDIATE }) { created } }`,
    id: 'endpoint',
    expect: 'NOT_FOUND',
  },
  createJobs: {
    query: `mutation ($id: ID) { createJobs(input: { jobs: [{ endpointId: $id, kind: IMMEDIATE }] }) { results { created } } }`,
    id: 'endpoint',
    expect: 'NOT_FOUND',
  },
  updateJob: {
    query: `mutation ($id: ID!) { updateJob(input: { id: $id, input: { mine: "B" } }) { id } }`,
    id: 'job',
    expect: 'NOT_FOUND',
  },
  pauseJob: { query: `mutation ($id: ID!) { pauseJob(id: $id) { id } }`, id: 'job', expect: 'NOT_FOUND' },
  resumeJob: { query: `mutation ($id: ID!) { resumeJob(id: $id) { id } }`, id: 'job', expect: 'NOT_FOUND' },
  cancelJob: { query: `mutation ($id: ID!) { cancelJob(id: $id) { cancelledExecutions } }`, id: 'job', expect: 'NOT_FOUND' },
  triggerJob: { query: `mutation ($id: ID!) { triggerJob(input: { id: $id, force: true }) { created } }`, id: 'job', expect: 'NOT_FOUND' },
  cancelExecution: { query: `mutation ($id: ID!) { cancelExecution(id: $id) { id } }`, id: 'execution', expect: 'NOT_FOUND' },
  retryExecution: { query: `mutation ($id: ID!) { retryExecution(id: $id) { id } }`, id: 'execution', expect: 'NOT_FOUND' },
  retryExecutions: {
    query: `mutation ($id: ID) { retryExecutions(filter: { jobId: $id }) { matched changed } }`,
    id: 'job',
    expect: 'NO_A_DATA',
  },
  cancelExecutions: {
    query: `mutation ($id: ID) { cancelExecutions(filter: { jobId: $id }) { matched changed } }`,
    id: 'job',
    expect: 'NO_A_DATA',
  },
  // A's job is not B's: skipped as NOT_FOUND, changed nothing.
  pauseJobs: {
    query: `mutation ($id: ID!) { pauseJobs(ids: [$id]) { matched changed skipped { code } } }`,
    id: 'job',
    expect: 'NO_A_DATA',
  },
  resumeJobs: {
    query: `mutation ($id: ID!) { resumeJobs(ids: [$id]) { matched changed skipped { code } } }`,
    id: 'job',
    expect: 'NO_A_DATA',
  },
  cancelJobs: {
    query: `mutation ($id: ID!) { cancelJobs(ids: [$id]) { matched changed skipped { code } } }`,
    id: 'job',
    expect: 'NO_A_DATA',
  },
  executionsByIds: {
    query: `query ($id: ID!) { executions(filter: { ids: [$id] }) { totalCount nodes { id } } }`,
    id: 'execution',
    expect: 'NO_A_DATA',
  },
  node: { query: `query ($id: ID!) { node(id: $id) { id __typename } }`, id: 'job', expect: 'NO_A_DATA' },
  apiKeys: { query: `{ apiKeys { id name prefix } }`, expect: 'NO_A_DATA' },
  apiKeyConnection: { query: `{ apiKeyConnection { totalCount nodes { id name prefix } } }`, expect: 'NO_A_DATA' },
  auditLogConnection: {
    query: `query ($id: String) { auditLogConnection(targetId: $id) { totalCount nodes { id targetId input } } }`,
    id: 'job',
    expect: 'NO_A_DATA',
  },
  handlerConnection: {
    query: `{ handlerConnection { totalCount nodes { kind name workers { id } lastRun { id } schedule { lastTickRunId } } } }`,
    expect: 'NO_A_DATA',
  },
  createSubscriptionTicket: { query: `mutation { createSubscriptionTicket { ticket expiresAt } }`, expect: 'NO_A_DATA' },
  auditLog: { query: `query ($id: String) { auditLog(targetId: $id) { entries { id targetId input } } }`, id: 'job', expect: 'NO_A_DATA' },
  createApiKey: { query: `mutation { createApiKey(input: { name: "b", role: VIEWER }) { key apiKey { id } } }`, expect: 'NO_A_DATA' },
  revokeApiKey: { query: `mutation ($id: ID!) { revokeApiKey(id: $id) { id } }`, id: 'apiKey', expect: 'NOT_FOUND' },
  runs: { query: `{ runs { id name findings { nodes { id resourceId } } } }`, expect: 'NO_A_DATA' },
  runConnection: {
    query: `{ runConnection { nodes { id name findings { nodes { id resourceId } } findingConnection { totalCount nodes { id resourceId } } findingCounts { kind count } } } }`,
    expect: 'NO_A_DATA',
  },
  run: { query: `query ($id: ID!) { run(id: $id) { id findings { nodes { id } } } }`, id: 'run', expect: 'NOT_FOUND' },
  triggerRun: { query: `mutation { triggerRun(input: { name: "a.scan" }) { outcome run { id } } }`, expect: 'NO_A_DATA' },
  cancelRun: { query: `mutation ($id: ID!) { cancelRun(id: $id) { id } }`, id: 'run', expect: 'NOT_FOUND' },
  handlers: { query: `{ handlers { kind name workers { id } lastRun { id } schedule { lastTickRunId } } }`, expect: 'NO_A_DATA' },
  triggerHandler: {
    query: `mutation { triggerHandler(input: { name: "a.tick" }) { outcome handler { name lastRun { id } } } }`,
    expect: 'NO_A_DATA',
  },
  // B's own workspace, whatever B sends: there is no id to aim at A's.
  updateWorkspace: {
    query: `mutation { updateWorkspace(input: { name: "B was here" }) { id name concurrencyLimit } }`,
    expect: 'NO_A_DATA',
  },
  createWorkspace: {
    query: `mutation { createWorkspace(input: { slug: "default", name: "taken?" }) { workspace { id } } }`,
    expect: 'NO_A_DATA',
  },
  // Subscriptions, over SSE: an id of A is NOT_FOUND; a stream replayed from the start carries nothing of A.
  runProgress: { query: `subscription ($id: ID!) { runProgress(runId: $id) { id processed } }`, id: 'run', expect: 'NOT_FOUND' },
  batchProgress: {
    query: `subscription ($id: ID!) { batchProgress(batchId: $id) { id total pending jobs { nodes { id } } } }`,
    id: 'batch',
    expect: 'NOT_FOUND',
  },
  runFindings: {
    query: `subscription ($id: ID!) { runFindings(runId: $id, after: "0") { id resourceId } }`,
    id: 'run',
    expect: 'NOT_FOUND',
  },
  executionUpdates: {
    query: `subscription ($id: ID) { executionUpdates(jobId: $id, after: "0") { executionId } }`,
    id: 'job',
    expect: 'NOT_FOUND',
  },
  jobEvents: { query: `subscription { jobEvents(after: "0") { jobId endpointId } }`, expect: 'NO_A_DATA' },
  runEvents: { query: `subscription { runEvents(after: "0") { runId name } }`, expect: 'NO_A_DATA' },
  alertRules: { query: `{ alertRules { nodes { id name jobIds } } }`, expect: 'NO_A_DATA' },
  alertRule: { query: `query ($id: ID!) { alertRule(id: $id) { id } }`, id: 'rule', expect: 'NOT_FOUND' },
  alerts: { query: `{ alerts { nodes { id summary subjectId } } }`, expect: 'NO_A_DATA' },
  alert: { query: `query ($id: ID!) { alert(id: $id) { id } }`, id: 'alert', expect: 'NOT_FOUND' },
  createAlertRule: {
    query: `mutation ($id: ID!) { createAlertRule(input: { name: "b.rule", condition: EXECUTION_FAILED, email: true, jobIds: [$id] }) { id } }`,
    id: 'job',
    expect: 'NOT_FOUND',
  },
  updateAlertRule: {
    query: `mutation ($id: ID!) { updateAlertRule(input: { id: $id, enabled: false }) { id } }`,
    id: 'rule',
    expect: 'NOT_FOUND',
  },
  deleteAlertRule: { query: `mutation ($id: ID!) { deleteAlertRule(id: $id) { id } }`, id: 'rule', expect: 'NOT_FOUND' },
  alertStates: {
    query: `{ alertStates(status: [OPEN, ACKNOWLEDGED, RESOLVED]) { totalCount nodes { id subjectId lastAlert { id } silence { id } } } }`,
    expect: 'NO_A_DATA',
  },
  alertState: { query: `query ($id: ID!) { alertState(id: $id) { id } }`, id: 'state', expect: 'NOT_FOUND' },
  alertSilences: { query: `{ alertSilences { nodes { id ruleId subjectId } } }`, expect: 'NO_A_DATA' },
  acknowledgeAlertState: { query: `mutation ($id: ID!) { acknowledgeAlertState(id: $id) { id } }`, id: 'state', expect: 'NOT_FOUND' },
  silenceAlerts: {
    query: `mutation ($id: ID!) { silenceAlerts(input: { ruleId: $id, durationMs: 600000 }) { id } }`,
    id: 'rule',
    expect: 'NOT_FOUND',
  },
  unsilenceAlerts: { query: `mutation ($id: ID!) { unsilenceAlerts(id: $id) { id } }`, id: 'silence', expect: 'NOT_FOUND' },
  setJobAlertsOptOut: {
    query: `mutation ($id: ID!) { setJobAlertsOptOut(input: { jobId: $id, optOut: true }) { alertsOptOut } }`,
    id: 'job',
    expect: 'NOT_FOUND',
  },
  setRetention: {
    query: `mutation { setRetention(input: { executionsDays: 1 }) { executionsDays overrides { executionsDays } } }`,
    expect: 'NO_A_DATA',
  },
  pruneHistory: {
    query: `mutation { pruneHistory(input: { maxBatches: 1 }) { complete removed { jobs executions attempts auditLog } } }`,
    expect: 'NO_A_DATA',
  },
  alertRaised: { query: `subscription { alertRaised(after: "0") { alertId alert { id summary } } }`, expect: 'NO_A_DATA' },
  // Federation: B's key and A's ids resolve to null (test/graphql/federation.test.ts covers every entity type).
  _entities: {
    query: `query ($id: ID!) { _entities(representations: [{ __typename: "Job", id: $id }]) { ... on Job { id name input } } }`,
    id: 'job',
    expect: 'NO_A_DATA',
  },
  _service: { query: `{ _service { sdl } }`, expect: 'NO_A_DATA' },
  handlerCatalog: {
    query: `subscription { handlerCatalog { handlers { kind name workers { id } lastRun { id } schedule { lastTickRunId } } } }`,
    expect: 'NO_A_DATA',
  },
};

const rootFields = () => [
  ...Object.keys(schema.getQueryType()!.getFields()),
  ...Object.keys(schema.getMutationType()?.getFields() ?? {}),
  ...Object.keys(schema.getSubscriptionType()?.getFields() ?? {}),
];

async function snapshotOfA() {
  const tables = [
    'endpoints',
    'payload_specs',
    'configs',
    'jobs',
    'executions',
    'batches',
    'api_keys',
    'runs',
    'findings',
    'run_schedules',
    'alert_rules',
    'alert_notifications',
    'alert_states',
    'alert_silences',
  ];
  const out: Record<string, unknown> = {};
  for (const table of tables) {
    out[table] = (
      await t.query(`select * from ${table} where workspace_id = $1 order by ${table === 'run_schedules' ? 'name' : 'id'}`, [
        t.actor.workspaceId,
      ])
    ).rows;
  }
  return out;
}

describe('workspace isolation', () => {
  it('has a cross-workspace probe for every root field', () => {
    expect(rootFields().filter((f) => !(f in probes))).toEqual([]);
  });

  it.each(Object.entries(probes))('%s: workspace B cannot read or change anything of workspace A', async (_field, probe) => {
    const before = await snapshotOfA();
    const res = await g.gql(probe.query, probe.id ? { id: a[probe.id] } : {}, t.otherActor);
    // Each request has its own id (extensions.requestId): not part of what is compared.
    const text = JSON.stringify(res).replace(/"requestId":"[^"]*"/g, '"requestId":"<request>"');
    // The id B sent may be echoed back in the error; any other id of A is a leak.
    const echoedAway = probe.id ? text.replaceAll(a[probe.id]!, '<id>') : text;
    for (const id of Object.values(a)) expect(echoedAway).not.toContain(id);
    expect(text).not.toContain('a-secret-ish');
    expect(text).not.toContain(t.actor.workspaceId);
    if (probe.expect === 'NOT_FOUND') {
      expect(res.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
      // No existence oracle: an id that exists nowhere gets the same answer, but for the id itself.
      const nowhere = await g.gql(probe.query, { id: NOWHERE }, t.otherActor);
      expect(
        JSON.stringify(nowhere)
          .replace(/"requestId":"[^"]*"/g, '"requestId":"<request>"')
          .replaceAll(NOWHERE, '<id>'),
      ).toBe(text.replaceAll(a[probe.id!]!, '<id>'));
    }
    expect(await snapshotOfA()).toEqual(before);
  });
});
