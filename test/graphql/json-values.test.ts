/**
 * Every JSON-typed field answers the JSON it holds, exactly, whatever its keys: `then` (which an
 * executor takes for a promise), `constructor`, `__proto__`, `toJSON`, `valueOf`. The fields are
 * found by introspection, so a JSON field added later without a case here fails the first test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/service/kernel/actor.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';
import { collect, startLiveGateway } from '../support/live.js';

// Parsed, not written as a literal: a literal's `__proto__` would set the prototype instead of
// making a key, and the value must hold the key as JSON does.
const TREE_TEXT =
  '{"then":"x","constructor":"c","__proto__":{"polluted":true},"toJSON":"j","valueOf":"v","hasOwnProperty":"h",' +
  '"nested":{"then":{"then":1},"__proto__":[1,{"then":null}]},"list":[{"then":"y"},{"toJSON":{}}]}';
// Headers are names to string values.
const FLAT_TEXT = '{"then":"x","constructor":"c","__proto__":"p","toJSON":"j","valueOf":"v","hasownproperty":"h"}';
const tree = () => JSON.parse(TREE_TEXT) as Record<string, unknown>;

/** JSON text with every object's keys sorted, built without assigning keys (so `__proto__` stays one). */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

let t: TestDb;
let g: TestGateway;
const ids: Record<string, string> = {};
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  // No worker runs here: executions stay PENDING, rows stay as the fixtures left them.
  ids.handler = (await t.service.registerEndpoint(t.actor, { name: 'json.h', kind: 'HANDLER', handlerName: 'h' })).id;
  ids.http = (await t.service.registerEndpoint(t.actor, { name: 'json.web', kind: 'HTTP', url: 'https://93.184.216.34/hook' })).id;
  const job = await g.gql(`mutation { createJob(input: { endpointName: "json.h", kind: IMMEDIATE }) { job { id lastExecution { id } } } }`);
  ids.job = job.data.createJob.job.id;
  ids.execution = job.data.createJob.job.lastExecution.id;
  const ws = t.actor.workspaceId;
  await t.query(
    `insert into attempts (workspace_id, execution_id, attempt_number, lease_epoch, worker_id, target)
     values ($1, $2, 1, 1, 'w', jsonb_build_object('method', 'POST', 'url', 'https://93.184.216.34/hook', 'headers', '{}'::jsonb))`,
    [ws, ids.execution],
  );
  ids.run = (await t.query(`insert into runs (workspace_id, name) values ($1, 'json.scan') returning id`, [ws])).rows[0].id;
  await t.query(`insert into findings (workspace_id, run_id, kind, severity, resource_id) values ($1, $2, 'k', 'INFO', 'r')`, [
    ws,
    ids.run,
  ]);
  const spec = await g.gql(`mutation { createPayloadSpec(input: { name: "json.spec", jsonSchema: { type: "object" } }) { id } }`);
  ids.spec = spec.data.createPayloadSpec.id;
  const rule = await g.gql(`mutation { createAlertRule(input: { name: "json", condition: EXECUTION_FAILED, email: true }) { id } }`);
  ids.rule = rule.data.createAlertRule.id;
  await t.query(
    `insert into alert_notifications (workspace_id, rule_id, condition, kind, subject_type, subject_key, window_start,
       first_seen_at, last_seen_at, occurrences, summary)
     values ($1, $2, 'EXECUTION_FAILED', 'FIRING', 'JOB', 'k', now(), now(), now(), 1, 's')`,
    [ws, ids.rule],
  );
});
afterAll(() => t.close());

interface Case {
  /** Stores the value where the field reads it from. */
  store(text: string): Promise<unknown>;
  query: () => string;
  pick(data: any): unknown;
  /** Who asks, when not the test key's actor (a field only some may read). */
  actor?: () => Actor;
  value: string;
}

const set = (sql: string) => (text: string) => t.query(sql, [text, t.actor.workspaceId]);
const CASES: Record<string, Case> = {
  'Alert.detail': {
    store: set(`update alert_notifications set detail = $1::jsonb where workspace_id = $2`),
    query: () => `{ alerts(first: 1) { nodes { detail } } }`,
    pick: (d) => d.alerts.nodes[0].detail,
    value: TREE_TEXT,
  },
  'AttemptTarget.headers': {
    store: set(`update attempts set target = jsonb_set(target, '{headers}', $1::jsonb) where workspace_id = $2`),
    query: () => `{ execution(id: "${ids.execution}") { attempts { target { headers } } } }`,
    pick: (d) => d.execution.attempts[0].target.headers,
    value: FLAT_TEXT,
  },
  'AuditEntry.input': {
    store: set(`update audit_log set input = $1::jsonb where workspace_id = $2`),
    query: () => `{ auditLogConnection(first: 1) { nodes { input } } }`,
    pick: (d) => d.auditLogConnection.nodes[0].input,
    value: TREE_TEXT,
  },
  'Endpoint.headers': {
    store: set(`update endpoints set headers = $1::jsonb where workspace_id = $2 and name = 'json.web'`),
    query: () => `{ endpoint(name: "json.web") { headers } }`,
    pick: (d) => d.endpoint.headers,
    value: FLAT_TEXT,
  },
  'Execution.input': {
    store: set(`update executions set input = $1::jsonb where workspace_id = $2`),
    query: () => `{ execution(id: "${ids.execution}") { input } }`,
    pick: (d) => d.execution.input,
    value: TREE_TEXT,
  },
  'Finding.detail': {
    store: set(`update findings set detail = $1::jsonb where workspace_id = $2`),
    query: () => `{ run(id: "${ids.run}") { findingConnection(first: 1) { nodes { detail } } } }`,
    pick: (d) => d.run.findingConnection.nodes[0].detail,
    value: TREE_TEXT,
  },
  'Job.input': {
    store: set(`update jobs set input = $1::jsonb where workspace_id = $2`),
    query: () => `{ jobs(first: 5) { nodes { input } } }`,
    pick: (d) => d.jobs.nodes[0].input,
    value: TREE_TEXT,
  },
  'PayloadSpec.jsonSchema': {
    store: set(`update payload_specs set json_schema = $1::jsonb where workspace_id = $2`),
    query: () => `{ payloadSpecs(first: 1) { nodes { jsonSchema } } }`,
    pick: (d) => d.payloadSpecs.nodes[0].jsonSchema,
    value: TREE_TEXT,
  },
  'Run.params': {
    store: set(`update runs set params = $1::jsonb where workspace_id = $2`),
    query: () => `{ run(id: "${ids.run}") { params } }`,
    pick: (d) => d.run.params,
    value: TREE_TEXT,
  },
  'HandlerOutcome.extra': {
    // An interval handler's last tick, in the catalogue of a live worker; installation admins read it.
    store: async (text) => {
      await t.query(
        `insert into workers (id, host, pid, stale_ms, handlers) values ('json-worker', 'h', 1, 3600000, $1)
                     on conflict (id) do update set heartbeat_at = now()`,
        [JSON.stringify([{ kind: 'INTERVAL', name: 'json.tick', everyMs: 3_600_000 }])],
      );
      await t.query(
        `insert into interval_handlers (name, every_ms, next_due_at, last_status, last_count, last_extra, last_started_at, last_finished_at)
         values ('json.tick', 3600000, now() + interval '1 hour', 'OK', 1, $1::jsonb, now(), now())
         on conflict (name) do update set last_extra = excluded.last_extra`,
        [text],
      );
    },
    query: () => `{ handlerConnection(kind: INTERVAL, name: "json.tick") { edges { node { lastOutcome { extra } } } } }`,
    pick: (d) => d.handlerConnection.edges[0].node.lastOutcome.extra,
    value: TREE_TEXT,
    actor: () => ({ ...t.actor, installationAdmin: true }),
  },
  'Run.stats': {
    store: set(`update runs set stats = $1::jsonb where workspace_id = $2`),
    query: () => `{ run(id: "${ids.run}") { stats } }`,
    pick: (d) => d.run.stats,
    value: TREE_TEXT,
  },
};

const INTROSPECT = `{ __schema { types { name kind fields { name type { name kind ofType { name kind ofType { name kind ofType { name } } } } } } } }`;
type TypeRef = { name: string | null; kind: string; ofType?: TypeRef | null };
const namedType = (ref: TypeRef): string | null => (ref.ofType ? namedType(ref.ofType) : ref.name);

describe('JSON values round-trip whatever their keys', () => {
  it('has a case for every JSON-typed output field the schema has', async () => {
    const res = await g.gql(INTROSPECT);
    expect(res.errors).toBeUndefined();
    const fields: string[] = [];
    for (const type of res.data.__schema.types as { name: string; kind: string; fields: { name: string; type: TypeRef }[] | null }[]) {
      if (type.kind !== 'OBJECT' || type.name.startsWith('__')) continue;
      for (const field of type.fields ?? []) if (namedType(field.type) === 'JSON') fields.push(`${type.name}.${field.name}`);
    }
    expect(fields.sort()).toEqual(Object.keys(CASES).sort());
  });

  it.each(Object.keys(CASES))('%s answers a value with then, constructor, __proto__, toJSON and valueOf keys exactly', async (name) => {
    const c = CASES[name]!;
    await c.store(c.value);
    const res = await g.gql(c.query(), undefined, c.actor?.());
    expect(res.errors).toBeUndefined();
    expect(canonical(c.pick(res.data))).toBe(canonical(JSON.parse(c.value)));
  });

  it('answers createJob with a then key in its input, saved once, and lists it for every reader', async () => {
    const before = (await t.query(`select count(*)::int as n from jobs`)).rows[0].n;
    const created = await g.gql(
      `mutation ($input: JSON) { createJob(input: { endpointName: "json.h", kind: IMMEDIATE, input: $input }) { job { id input } } }`,
      { input: tree() },
    );
    expect(created.errors).toBeUndefined();
    expect(canonical(created.data.createJob.job.input)).toBe(canonical(tree()));
    expect((await t.query(`select count(*)::int as n from jobs`)).rows[0].n).toBe(before + 1);

    // The same keys written as a literal in the document (parseLiteral, not parseValue).
    const literal = await g.gql(
      `mutation { createJob(input: { endpointName: "json.h", kind: IMMEDIATE, input: { then: "x", toJSON: { then: 1 } } }) { job { input } } }`,
    );
    expect(literal.errors).toBeUndefined();
    expect(literal.data.createJob.job.input).toEqual({ then: 'x', toJSON: { then: 1 } });

    const list = await g.gql(`{ jobs(first: 50) { nodes { id input } } executions(first: 50) { nodes { input } } }`);
    expect(list.errors).toBeUndefined();
    const listed = list.data.jobs.nodes.find((n: { id: string }) => n.id === created.data.createJob.job.id);
    expect(canonical(listed.input)).toBe(canonical(tree()));
  });

  it("answers a payload spec that uses JSON Schema's if/then keywords, when created and in lists", async () => {
    const schema = { type: 'object', if: { required: ['kind'] }, then: { required: ['amount'] }, else: { required: ['note'] } };
    const spec = await g.gql(
      `mutation ($s: JSON!) { createPayloadSpec(input: { name: "json.conditional", jsonSchema: $s }) { id jsonSchema } }`,
      { s: schema },
    );
    expect(spec.errors).toBeUndefined();
    expect(spec.data.createPayloadSpec.jsonSchema).toEqual(schema);
    const list = await g.gql(`{ payloadSpecs(first: 50) { nodes { jsonSchema } } }`);
    expect(list.errors).toBeUndefined();
    expect(list.data.payloadSpecs.nodes.map((n: { jsonSchema: unknown }) => n.jsonSchema)).toContainEqual(schema);
  });

  it('streams a run whose params, stats and findings have then keys over graphql-ws', async () => {
    await t.query(`update runs set params = $1::jsonb, stats = $1::jsonb where id = $2`, [TREE_TEXT, ids.run]);
    await t.query(`update findings set detail = $1::jsonb where run_id = $2`, [TREE_TEXT, ids.run]);
    const live = await startLiveGateway(t);
    try {
      const key = (await t.service.bootstrapKey('default', 'VIEWER', 'json viewer')).key;
      const progress = collect(live.client(key), `subscription ($id: ID!) { runProgress(runId: $id) { params stats } }`, { id: ids.run });
      const findings = collect(live.client(key), `subscription ($id: ID!) { runFindings(runId: $id, after: "0") { detail } }`, {
        id: ids.run,
      });
      const [run] = await progress.until((xs) => xs.length >= 1);
      const [finding] = await findings.until((xs) => xs.length >= 1);
      progress.stop();
      findings.stop();
      expect(canonical(run.params)).toBe(canonical(tree()));
      expect(canonical(run.stats)).toBe(canonical(tree()));
      expect(canonical(finding.detail)).toBe(canonical(tree()));
    } finally {
      await live.close();
    }
  });
});
