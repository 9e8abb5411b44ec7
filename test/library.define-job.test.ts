/**
 * Typed job definitions (gate.defineJob): the enqueue typed from the zod schema, definitions
 * idempotent across calls, the generated payload spec applied to GraphQL's createJob, and an
 * enqueue in the caller's transaction that rolls back with it.
 */
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { createJobgate, type Jobgate, type JobDefinition } from '../src/index.js';
import { codeOf, createTestDb, type TestDb } from './support/db.js';
import { settled } from './support/engine.js';
import { createTestGateway } from './support/graphql.js';

let t: TestDb;
let gate: Jobgate;
const invoices = z.object({ customerId: z.string().min(1), cents: z.number().int().positive(), note: z.string().optional() });
const sent: { customerId: string; cents: number }[] = [];
let sendInvoice: JobDefinition<z.input<typeof invoices>>;

beforeAll(async () => {
  t = await createTestDb();
  gate = await createJobgate({ databaseUrl: t.url, migrate: false });
  sendInvoice = await gate.defineJob('billing.send-invoice', invoices, async (input) => {
    expectTypeOf(input).toEqualTypeOf<{ customerId: string; cents: number; note?: string | undefined }>();
    sent.push(input);
  });
});
afterAll(async () => {
  await gate?.close();
  await t?.close();
});

const jobsNamed = async (name: string) =>
  (await t.query<{ n: number }>(`select count(*)::int as n from jobs where name = $1`, [name])).rows[0]!.n;

describe('gate.defineJob', () => {
  it('types enqueue from the schema', () => {
    expectTypeOf(sendInvoice.enqueue).parameter(0).toEqualTypeOf<{ customerId: string; cents: number; note?: string | undefined }>();
    // Type-level only: the typecheck refuses these calls, so they never run.
    const refused = () => {
      // @ts-expect-error cents is a number
      void sendInvoice.enqueue({ customerId: 'c-1', cents: '12' });
      // @ts-expect-error customerId is required
      void sendInvoice.enqueue({ cents: 12 });
    };
    expect(typeof refused).toBe('function');
  });

  it('makes the HANDLER endpoint with a payload spec generated from the schema, and runs the handler with typed input', async () => {
    expect(sendInvoice.defined.outcome).toBe('CREATED');
    expect(sendInvoice.defined.endpoint).toMatchObject({
      name: 'billing.send-invoice',
      kind: 'HANDLER',
      handlerName: 'billing.send-invoice',
    });
    expect(sendInvoice.defined.endpoint.payloadSpecId).toBe(sendInvoice.defined.payloadSpec.id);
    expect(sendInvoice.defined.payloadSpec.jsonSchema).toMatchObject({
      type: 'object',
      required: ['customerId', 'cents'],
      properties: { customerId: { type: 'string', minLength: 1 }, cents: { type: 'integer' } },
    });
    await gate.startWorker({ pollMs: 50 });
    const { job } = await sendInvoice.enqueue({ customerId: 'c-1', cents: 1200 }, { name: 'invoice-c-1' });
    expect((await settled(t, job.id)).status).toBe('SUCCEEDED');
    expect(sent).toContainEqual({ customerId: 'c-1', cents: 1200 });
  });

  it('refuses a schema with a type JSON cannot carry (a Date, a bigint), naming the job, and defines nothing', async () => {
    await expect(gate.defineJob('dated', z.object({ at: z.date() }), async () => {})).rejects.toThrow(
      /defineJob\("dated"\): Date cannot be represented in JSON Schema: .*z\.iso\.datetime\(\)/,
    );
    await expect(gate.defineJob('big', z.object({ n: z.bigint() }), async () => {})).rejects.toThrow(/defineJob\("big"\)/);
    expect((await t.query(`select count(*)::int as n from endpoints where name in ('dated', 'big')`)).rows[0].n).toBe(0);
  });

  it('is idempotent: defined again it changes nothing; with a changed schema it updates the spec in place', async () => {
    const specs = async () => (await t.query(`select id, version from payload_specs where name = 'billing.send-invoice'`)).rows;
    const before = await specs();
    const again = await gate.defineJob('billing.send-invoice', invoices, async (input) => void sent.push(input));
    expect(again.defined.outcome).toBe('UNCHANGED');
    expect(again.defined.endpoint.id).toBe(sendInvoice.defined.endpoint.id);
    expect(await specs()).toEqual(before);
    const wider = invoices.extend({ currency: z.enum(['EUR', 'USD']).optional() });
    const changed = await gate.defineJob('billing.send-invoice', wider, async (input) => void sent.push(input));
    expect(changed.defined.outcome).toBe('UPDATED');
    expect(await specs()).toEqual([{ id: before[0].id, version: before[0].version + 1 }]);
    await gate.defineJob('billing.send-invoice', invoices, async (input) => void sent.push(input));
    // Settings it gives are applied; settings it leaves out stay as they were set.
    const tuned = await gate.defineJob('billing.send-invoice', invoices, async (input) => void sent.push(input), { maxAttempts: 3 });
    expect(tuned.defined).toMatchObject({ outcome: 'UPDATED', endpoint: { maxAttempts: 3 } });
    const plain = await gate.defineJob('billing.send-invoice', invoices, async (input) => void sent.push(input));
    expect(plain.defined).toMatchObject({ outcome: 'UNCHANGED', endpoint: { maxAttempts: 3 } });
    const endpoints = await t.query(`select count(*)::int as n from endpoints where name = 'billing.send-invoice' and archived_at is null`);
    expect(endpoints.rows[0].n).toBe(1);
    // A name another registration owns is refused, as registering it twice is.
    gate.handle('owned.elsewhere', async () => {});
    await expect(gate.defineJob('owned.elsewhere', invoices, async () => {})).rejects.toThrow(/already registered/);
  });

  it('refuses bad input before writing anything: the typed enqueue locally, GraphQL createJob by the generated spec (VALIDATION_FAILED)', async () => {
    expect(await codeOf(() => sendInvoice.enqueue({ customerId: '', cents: 5 }, { name: 'bad-local' }))).toBe('VALIDATION_FAILED');
    const g = createTestGateway(t);
    const res = await g.gql(
      `mutation { createJob(input: { endpointName: "billing.send-invoice", kind: IMMEDIATE, name: "bad-graphql", input: { customerId: "c-2", cents: "twelve" } }) { job { id } } }`,
    );
    expect(res.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
    expect(JSON.stringify(res.errors?.[0]?.extensions)).toContain('cents');
    const ok = await g.gql(
      `mutation { createJob(input: { endpointName: "billing.send-invoice", kind: IMMEDIATE, name: "good-graphql", input: { customerId: "c-2", cents: 12 } }) { job { id } } }`,
    );
    expect(ok.errors).toBeUndefined();
    expect(await jobsNamed('bad-local')).toBe(0);
    expect(await jobsNamed('bad-graphql')).toBe(0);
    expect(await jobsNamed('good-graphql')).toBe(1);
  });

  it("enqueues in the caller's transaction: rolled back, nothing is created; committed, the job is there", async () => {
    const client = await t.database.pool.connect();
    try {
      await client.query('begin');
      const { job } = await sendInvoice.enqueue({ customerId: 'c-3', cents: 300 }, { tx: client, name: 'in-tx-rolled-back' });
      expect((await client.query(`select count(*)::int as n from jobs where id = $1`, [job.id])).rows[0].n).toBe(1);
      await client.query('rollback');
      expect(await jobsNamed('in-tx-rolled-back')).toBe(0);
      expect((await t.query(`select count(*)::int as n from executions where job_id = $1`, [job.id])).rows[0].n).toBe(0);

      await client.query('begin');
      await sendInvoice.enqueue({ customerId: 'c-4', cents: 400 }, { tx: client, name: 'in-tx-committed' });
      await client.query('commit');
      expect(await jobsNamed('in-tx-committed')).toBe(1);
    } finally {
      client.release();
    }
  });
});
