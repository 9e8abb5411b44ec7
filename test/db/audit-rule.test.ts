/**
 * An audit row is written by one repository function (src/db/repositories/audit.ts, insertAuditEntry),
 * except where jobgate records its own work in the statement that does it (the reaper, retention,
 * event pruning, createJob's one-statement path), which restate the insert in SQL. These tests
 * hold every restatement to the rule's column list, and the list to the table: an audit column
 * added to one and not the others fails here.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_COLUMNS } from '../../src/db/repositories/audit.js';
import { createTestDb, type TestDb } from '../support/db.js';

const SRC_DB = path.resolve(import.meta.dirname, '../../src/db');

function sourcesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourcesUnder(full);
    return e.name.endsWith('.ts') ? [full] : [];
  });
}

/** Every `insert into audit_log (...)` written as SQL in src/db, with its file. */
function restatements(): { file: string; columns: string[] }[] {
  return sourcesUnder(SRC_DB).flatMap((file) =>
    [...fs.readFileSync(file, 'utf8').matchAll(/insert into audit_log\s*\(([^)]*)\)/gi)].map((m) => ({
      file: path.relative(SRC_DB, file),
      columns: m[1]!.split(',').map((c) => c.trim()),
    })),
  );
}

describe('the audit rule', () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await createTestDb();
  });
  afterAll(() => t.close());

  it('lists every column of audit_log but its id and time', async () => {
    const { rows } = await t.query<{ column_name: string }>(
      `select column_name from information_schema.columns where table_name = 'audit_log' and table_schema = current_schema()
       and column_name not in ('id', 'created_at') order by column_name`,
    );
    expect(rows.map((r) => r.column_name)).toEqual([...AUDIT_COLUMNS].sort());
  });

  it("is restated whole by every statement that writes jobgate's own audit rows (no key: actor_key_id left null)", () => {
    const found = restatements();
    expect(found.map((r) => r.file).sort()).toEqual([
      'statements/create-job.ts',
      'statements/event-partitions.ts',
      'statements/pruning.ts',
      'statements/reap.ts',
    ]);
    for (const r of found) {
      const expected = r.columns.includes('actor_key_id') ? [...AUDIT_COLUMNS] : AUDIT_COLUMNS.filter((c) => c !== 'actor_key_id');
      expect([...r.columns].sort(), r.file).toEqual([...expected].sort());
    }
  });
});
