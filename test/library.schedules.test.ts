/**
 * Declared schedules (gate.schedule / gate.schedules): created, updated in place, replaced,
 * left alone, retired when no longer declared; convergent across replicas declaring at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobgate, type Jobgate } from '../src/index.js';
import { codeOf, createTestDb, type TestDb } from './support/db.js';

let t: TestDb;
let gates: Jobgate[] = [];

beforeAll(async () => {
  t = await createTestDb();
  // Four replicas of the embedding application, each with its own pool.
  gates = await Promise.all(Array.from({ length: 4 }, () => createJobgate({ databaseUrl: t.url, migrate: false, poolMax: 3 })));
  await gates[0]!.client.registerEndpoint({ name: 'reports.http', kind: 'HTTP', url: 'https://reports.example.com/run' });
});
afterAll(async () => {
  await Promise.all(gates.map((g) => g.close()));
  await t?.close();
});

const liveJobs = async (name: string) =>
  (
    await t.query(
      `select id, status, cron_expression, timezone, input, overlap_policy from jobs where schedule_name = $1 and status <> 'RETIRED'`,
      [name],
    )
  ).rows;

describe('gate.schedule', () => {
  it('creates the named cron job once when several replicas declare it at the same moment', async () => {
    const results = await Promise.all(
      gates.map((g) =>
        g.schedule('nightly-report', { cron: '0 3 * * *', timezone: 'Europe/Berlin', endpoint: 'reports.http', input: { kind: 'full' } }),
      ),
    );
    expect(results.map((r) => r.outcome).sort()).toEqual(['CREATED', 'UNCHANGED', 'UNCHANGED', 'UNCHANGED']);
    expect(new Set(results.map((r) => r.job.id)).size).toBe(1);
    const rows = await liveJobs('nightly-report');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ cron_expression: '0 3 * * *', timezone: 'Europe/Berlin', input: { kind: 'full' } });
    expect(results[0]!.job.scheduleName).toBe('nightly-report');
  });

  it('updates the job in place when the expression, zone, input or policies change, instead of CONFLICT', async () => {
    const before = (await liveJobs('nightly-report'))[0];
    const results = await Promise.all(
      gates.map((g) =>
        g.schedule('nightly-report', {
          cron: '30 4 * * 1-5',
          timezone: 'America/New_York',
          endpoint: 'reports.http',
          input: { kind: 'delta' },
          overlapPolicy: 'QUEUE',
        }),
      ),
    );
    expect(results.map((r) => r.outcome).sort()).toEqual(['UNCHANGED', 'UNCHANGED', 'UNCHANGED', 'UPDATED']);
    const rows = await liveJobs('nightly-report');
    expect(rows).toEqual([
      {
        id: before.id,
        status: 'ACTIVE',
        cron_expression: '30 4 * * 1-5',
        timezone: 'America/New_York',
        input: { kind: 'delta' },
        overlap_policy: 'QUEUE',
      },
    ]);
  });

  it("registers a handler's endpoint once, and replaces the job when the schedule moves to another endpoint", async () => {
    const old = (await liveJobs('nightly-report'))[0];
    const results = await Promise.all(
      gates.map((g) =>
        g.schedule('nightly-report', {
          cron: '30 4 * * 1-5',
          timezone: 'America/New_York',
          handler: 'reports.nightly',
          input: { kind: 'delta' },
          overlapPolicy: 'QUEUE',
        }),
      ),
    );
    expect(results.map((r) => r.outcome).sort()).toEqual(['REPLACED', 'UNCHANGED', 'UNCHANGED', 'UNCHANGED']);
    expect((await t.query(`select kind, handler_name from endpoints where name = 'reports.nightly'`)).rows).toEqual([
      { kind: 'HANDLER', handler_name: 'reports.nightly' },
    ]);
    expect((await t.query(`select status from jobs where id = $1`, [old.id])).rows[0].status).toBe('RETIRED');
    expect(await liveJobs('nightly-report')).toHaveLength(1);
  });

  it('refuses a bad declaration with VALIDATION_FAILED and changes nothing', async () => {
    const before = await liveJobs('nightly-report');
    expect(await codeOf(() => gates[0]!.schedule('nightly-report', { cron: 'not a cron', handler: 'reports.nightly' }))).toBe(
      'VALIDATION_FAILED',
    );
    expect(
      await codeOf(() => gates[0]!.schedule('nightly-report', { cron: '0 3 * * *', endpoint: 'reports.http', handler: 'reports.nightly' })),
    ).toBe('VALIDATION_FAILED');
    expect(await codeOf(() => gates[0]!.schedule('nightly-report', { cron: '0 3 * * *', endpoint: 'no.such-endpoint' }))).toBe(
      'VALIDATION_FAILED',
    );
    expect(await liveJobs('nightly-report')).toEqual(before);
  });
});

describe('gate.schedules with retireUndeclared', () => {
  it('retires declared schedules the code no longer declares, leaving other jobs alone', async () => {
    await gates[0]!.schedules({
      'hourly-sync': { cron: '0 * * * *', handler: 'sync.hourly' },
      'weekly-digest': { cron: '0 9 * * 1', handler: 'mail.digest' },
    });
    const plain = await gates[0]!.client.createJob({
      endpointName: 'reports.http',
      kind: 'CRON',
      cron: { expression: '0 0 * * *' },
      name: 'not-declared',
    });
    const results = await Promise.all(
      gates.map((g) =>
        g.schedules(
          {
            'hourly-sync': { cron: '0 * * * *', handler: 'sync.hourly' },
            'nightly-report': {
              cron: '30 4 * * 1-5',
              timezone: 'America/New_York',
              handler: 'reports.nightly',
              input: { kind: 'delta' },
              overlapPolicy: 'QUEUE',
            },
          },
          { retireUndeclared: true },
        ),
      ),
    );
    // Exactly one replica retired the digest; the others found it retired already.
    expect(results.flatMap((r) => r.retired.map((j) => j.scheduleName))).toEqual(['weekly-digest']);
    expect(await liveJobs('weekly-digest')).toEqual([]);
    expect(await liveJobs('hourly-sync')).toHaveLength(1);
    expect(await liveJobs('nightly-report')).toHaveLength(1);
    expect((await t.query(`select status from jobs where id = $1`, [plain.job.id])).rows[0].status).toBe('ACTIVE');
  });
});
