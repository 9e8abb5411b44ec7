/**
 * Parity: the same scenario through GraphQL and through the library leaves the same rows,
 * because both are adapters over one service.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobgate, type Jobgate } from '../src/index.js';
import { createTestDb, type TestDb } from './support/db.js';
import { createTestGateway } from './support/graphql.js';

const RUN_AT = '2031-02-03T04:05:06.000Z';
const STARTS_AT = '2031-01-01T00:00:00.000Z';

interface Driver {
  createPayloadSpec(input: object): Promise<string>;
  setConfig(input: object): Promise<string>;
  registerEndpoint(input: object): Promise<string>;
  updateEndpoint(input: object): Promise<void>;
  createJob(input: object): Promise<{ id: string; created: boolean } | { code: string }>;
  cancelJob(id: string): Promise<number | { code: string }>;
}

async function scenario(d: Driver) {
  const spec = await d.createPayloadSpec({ name: 'order.placed', jsonSchema: { type: 'object', required: ['orderId'] } });
  const config = await d.setConfig({
    name: 'shop.settings',
    entries: [
      { key: 'host', value: 'shop.example' },
      { key: 'token', value: 't0k3n', secret: true },
    ],
  });
  const other = await d.setConfig({ name: 'shop.other', entries: [] });
  const endpoint = await d.registerEndpoint({
    name: 'shop.notify',
    kind: 'HTTP',
    url: 'https://{{config.host}}/notify',
    headers: { authorization: 'Bearer {{config.token}}' },
    payloadSpecId: spec,
    configId: config,
    maxAttempts: 4,
  });
  await d.updateEndpoint({ id: endpoint, configId: other, description: 'notifies the shop' });
  const outcomes = [];
  outcomes.push(await d.createJob({ endpointId: endpoint, kind: 'IMMEDIATE', input: { orderId: 1 }, idempotencyKey: 'o-1' }));
  outcomes.push(await d.createJob({ endpointId: endpoint, kind: 'IMMEDIATE', input: { orderId: 1 }, idempotencyKey: 'o-1' }));
  outcomes.push(await d.createJob({ endpointId: endpoint, kind: 'IMMEDIATE', input: { orderId: 2 }, idempotencyKey: 'o-1' }));
  outcomes.push(await d.createJob({ endpointId: endpoint, kind: 'IMMEDIATE', input: { nope: true } }));
  outcomes.push(await d.createJob({ endpointName: 'shop.notify', kind: 'DELAYED', runAt: RUN_AT, input: { orderId: 3 }, maxAttempts: 2 }));
  const cron = await d.createJob({
    endpointName: 'shop.notify',
    kind: 'CRON',
    input: { orderId: 4 },
    cron: { expression: '15 9 * * 1-5', timezone: 'Europe/Berlin', startsAt: STARTS_AT, overlapPolicy: 'QUEUE' },
  });
  outcomes.push(cron);
  const first = outcomes[0] as { id: string };
  const cancelled = [await d.cancelJob(first.id), await d.cancelJob(first.id), await d.cancelJob((cron as { id: string }).id)];
  const flat = (o: unknown) => (typeof o === 'object' && o !== null && 'code' in o ? (o as { code: string }).code : o);
  return { outcomes: outcomes.map((o) => ('code' in o ? o.code : o.created)), cancelled: cancelled.map(flat) };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DETERMINISTIC_TIMES = new Set(['run_at', 'starts_at', 'ends_at', 'next_fire_at']);

/** Rows with ids replaced by first-seen labels and clock-dependent times reduced to set/unset. */
async function normalizedRows(t: TestDb) {
  const labels = new Map<string, string>();
  const label = (id: string) => labels.get(id) ?? (labels.set(id, `#${labels.size + 1}`), labels.get(id)!);
  const out: Record<string, unknown[]> = {};
  for (const table of ['payload_specs', 'configs', 'endpoints', 'jobs', 'executions']) {
    // jobgate's own rows (the reaper: its endpoint and job) are not part of the scenario.
    const userOnly =
      table === 'endpoints'
        ? `and type = 'USER'`
        : table === 'jobs' || table === 'executions'
          ? `and endpoint_id in (select id from endpoints where type = 'USER')`
          : '';
    const order = table === 'executions' ? 'created_at' : 'created_at, name nulls last';
    const { rows } = await t.query(`select * from ${table} where workspace_id = $1 ${userOnly} order by ${order}`, [t.actor.workspaceId]);
    out[table] = rows.map((row) =>
      Object.fromEntries(
        Object.entries(row).map(([k, v]) => {
          if (typeof v === 'string' && UUID.test(v)) return [k, label(v)];
          // Sealed secrets differ by their random IV; what matters is that they are sealed.
          if (v && typeof v === 'object' && !(v instanceof Date))
            return [k, JSON.parse(JSON.stringify(v).replace(/"enc:v1:[^"]+"/g, '"[sealed]"'))];
          if (v instanceof Date) {
            if (table === 'executions' && (k === 'scheduled_for' || k === 'run_after') && row.scheduled_for?.toISOString() === RUN_AT) {
              return [k, v.toISOString()];
            }
            return [k, DETERMINISTIC_TIMES.has(k) ? v.toISOString() : 'set'];
          }
          return [k, v];
        }),
      ),
    );
  }
  return out;
}

let viaGraphql: TestDb;
let viaLibrary: TestDb;
let gate: Jobgate;

beforeAll(async () => {
  [viaGraphql, viaLibrary] = await Promise.all([createTestDb(), createTestDb()]);
  gate = await createJobgate({ databaseUrl: viaLibrary.url, secretKey: Buffer.alloc(32, 7).toString('base64') });
});
afterAll(async () => {
  await gate.close();
  await Promise.all([viaGraphql.close(), viaLibrary.close()]);
});

describe('GraphQL and library parity', () => {
  it('leaves the same rows for the same scenario', async () => {
    const g = createTestGateway(viaGraphql);
    const call = async (mutation: string, field: string, variables: object, pick: (d: any) => any) => {
      const res = await g.gql(mutation, variables as Record<string, unknown>);
      if (res.errors) return { code: res.errors[0]!.extensions!.code as string };
      return pick(res.data[field]);
    };
    const graphqlDriver: Driver = {
      createPayloadSpec: (input) =>
        call(
          `mutation ($input: CreatePayloadSpecInput!) { createPayloadSpec(input: $input) { id } }`,
          'createPayloadSpec',
          { input },
          (d) => d.id,
        ),
      setConfig: (input) =>
        call(`mutation ($input: SetConfigInput!) { setConfig(input: $input) { id } }`, 'setConfig', { input }, (d) => d.id),
      registerEndpoint: (input) =>
        call(
          `mutation ($input: RegisterEndpointInput!) { registerEndpoint(input: $input) { id } }`,
          'registerEndpoint',
          { input },
          (d) => d.id,
        ),
      updateEndpoint: (input) =>
        call(
          `mutation ($input: UpdateEndpointInput!) { updateEndpoint(input: $input) { id } }`,
          'updateEndpoint',
          { input },
          () => undefined,
        ),
      createJob: (input) =>
        call(`mutation ($input: CreateJobInput!) { createJob(input: $input) { created job { id } } }`, 'createJob', { input }, (d) => ({
          id: d.job.id,
          created: d.created,
        })),
      cancelJob: (id) =>
        call(`mutation ($id: ID!) { cancelJob(id: $id) { cancelledExecutions } }`, 'cancelJob', { id }, (d) => d.cancelledExecutions),
    };
    const lib = gate.client;
    const caught = async <T>(fn: () => Promise<T>): Promise<T | { code: string }> => {
      try {
        return await fn();
      } catch (error) {
        return { code: (error as { code: string }).code };
      }
    };
    const libraryDriver: Driver = {
      createPayloadSpec: async (input) => (await lib.createPayloadSpec(input as never)).id,
      setConfig: async (input) => (await lib.setConfig(input as never)).id,
      registerEndpoint: async (input) => (await lib.registerEndpoint(input as never)).id,
      updateEndpoint: async (input) => void (await lib.updateEndpoint(input as never)),
      createJob: (input) =>
        caught(async () => {
          const r = await lib.createJob(input as never);
          return { id: r.job.id, created: r.created };
        }),
      cancelJob: (id) => caught(async () => (await lib.cancelJob(id)).cancelledExecutions),
    };

    const a = await scenario(graphqlDriver);
    const b = await scenario(libraryDriver);
    expect(a).toEqual({ outcomes: [true, false, 'CONFLICT', 'VALIDATION_FAILED', true, true], cancelled: [1, 'RETIRED', 0] });
    expect(b).toEqual(a);
    const rowsA = await normalizedRows(viaGraphql);
    expect(rowsA.jobs).toHaveLength(3);
    expect(await normalizedRows(viaLibrary)).toEqual(rowsA);
  });
});
