/**
 * The naming rules are written once in TypeScript (src/db/handler-name.ts, src/db/workspace-slug.ts)
 * and restated by the schema's CHECKs, which the database enforces on every row: the two must say
 * the same.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HANDLER_NAME, isHandlerName } from '../../src/db/handler-name.js';
import { WORKSPACE_SLUG } from '../../src/db/workspace-slug.js';
import { createTestDb, type TestDb } from '../support/db.js';

describe('the handler-name rule', () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb();
  });
  afterAll(() => t.close());

  it('is the pattern of the CHECK on every column that holds a handler name', async () => {
    const { rows } = await t.query<{ name: string; def: string }>(
      `select conname as name, pg_get_constraintdef(oid) as def from pg_constraint
       where conname in ('runs_name_check', 'run_schedules_name_check', 'interval_handlers_name_check') order by conname`,
    );
    expect(rows.map((r) => r.name)).toEqual(['interval_handlers_name_check', 'run_schedules_name_check', 'runs_name_check']);
    for (const r of rows) expect(r.def, r.name).toBe(`CHECK ((name ~ '${HANDLER_NAME.source}'::text))`);
  });

  it('accepts and refuses what the CHECK accepts and refuses', async () => {
    const samples = ['a', 'billing.sync', 'A_b-c:d.e', 'x'.repeat(200), '', 'x'.repeat(201), 'has space', 'slash/no', 'é', 'a\nb'];
    const { rows } = await t.query<{ name: string; ok: boolean }>(
      `select n as name, n ~ (select substring(pg_get_constraintdef(oid) from '''(.*)''') from pg_constraint where conname = 'runs_name_check') as ok
       from unnest($1::text[]) as n`,
      [samples],
    );
    expect(rows.filter((r) => r.ok).length).toBe(4);
    for (const r of rows) expect(isHandlerName(r.name), JSON.stringify(r.name)).toBe(r.ok);
  });
});

describe('the workspace-slug rule', () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb();
  });
  afterAll(() => t.close());

  it('is the pattern of the CHECK on workspaces.slug', async () => {
    const { rows } = await t.query<{ def: string }>(
      `select pg_get_constraintdef(oid) as def from pg_constraint where conname = 'workspaces_slug_check'`,
    );
    expect(rows.map((r) => r.def)).toEqual([`CHECK ((slug ~ '${WORKSPACE_SLUG.source}'::text))`]);
  });
});
