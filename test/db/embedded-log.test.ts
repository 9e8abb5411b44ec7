/**
 * The embedded Postgres's own log: an error there is one line, never the row or the statement
 * that caused it. The service checks every constraint on tables holding secrets before its
 * statements (test/service/constraints.test.ts); this is what holds when a check is missed.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.js';
import { migrate } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';

let server: EmbeddedPostgres;
let dir: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-pglog-'));
  fs.chmodSync(dir, 0o755);
  server = await startEmbeddedPostgres({ dataDir: dir, log: createLogger('warn'), ephemeral: true });
  await migrate(server.connectionString);
}, 120_000);
afterAll(async () => {
  await server?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('the embedded Postgres log', () => {
  it('records a constraint violation on a table holding secrets without the failing row, the statement or its parameters', async () => {
    const secret = `sk-log-${Date.now().toString(36)}`;
    const client = new pg.Client({ connectionString: server.connectionString });
    await client.connect();
    try {
      const workspace = (await client.query<{ id: string }>(`select id from workspaces where slug = 'default'`)).rows[0]!.id;
      const insert = `insert into endpoints (workspace_id, name, kind, url, method, headers, signing_secret, backoff_max_ms)
                      values ($1, 'log.check', 'HTTP', $2, 'POST', $3, $4, 500)`;
      // Parameters (as the service sends them), then the secret written into the statement itself.
      await expect(
        client.query(insert, [
          workspace,
          `https://example.com/?key=${secret}`,
          JSON.stringify({ authorization: `Bearer ${secret}` }),
          `sealed-${secret}`,
        ]),
      ).rejects.toMatchObject({ code: '23514' });
      await expect(
        client.query(`${insert.replace('$4', `'literal-${secret}'`)}`, [workspace, 'https://example.com/', '{}']),
      ).rejects.toMatchObject({ code: '23514' });
      // A not-null violation quotes its row the same way.
      await expect(
        client.query(`insert into configs (workspace_id, name, entries) values ($1, null, $2)`, [
          workspace,
          JSON.stringify({ k: { value: secret, secret: true } }),
        ]),
      ).rejects.toMatchObject({ code: '23502' });
    } finally {
      await client.end();
    }
    const logged = fs.readFileSync(path.join(dir, 'postgres.log'), 'utf8');
    // The errors are logged, as one line each...
    expect(logged).toMatch(/violates check constraint "endpoints_check"/);
    expect(logged).toMatch(/violates not-null constraint/);
    // ...and nothing of the rows or statements.
    expect(logged).not.toContain(secret);
    expect(logged).not.toMatch(/Failing row contains|STATEMENT:/);
  });
});
