import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobService } from '../../src/service/index.js';
import { KEY_CACHE_TTL_MS } from '../../src/service/access/authenticate.js';
import { Kysely, PostgresDialect } from 'kysely';
import { pgTypes } from '../../src/db/pg-types.js';
import type { DB } from '../../src/db/types.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/eventually.js';
import { ownPool } from '../support/own-pool.js';

let t: TestDb;

beforeAll(async () => {
  t = await createTestDb();
});
afterAll(() => t.close());

describe('authenticate', () => {
  it('looks a key up once while it is remembered, not once per request', async () => {
    const { key } = await t.service.createApiKey(t.actor, { name: 'remembered', role: 'OPERATOR' });
    let lookups = 0;
    const db = new Kysely<DB>({
      dialect: new PostgresDialect({ pool: t.database.pool }),
      log: (event) => void (/from "?api_keys"? where "?key_hash/.test(event.query.sql) && lookups++),
    });
    const service = createJobService({ db, defaultMaxAttempts: 5 });
    const first = await service.authenticate(key);
    // Asked together, right after: each finds the key remembered before it awaits anything.
    const again = await Promise.all(Array.from({ length: 20 }, () => service.authenticate(key)));
    expect(again.every((a) => a.keyId === first.keyId && a.role === 'OPERATOR')).toBe(true);
    expect(lookups).toBe(1);
  });

  it('makes one lookup for the concurrent requests of a key it does not remember', async () => {
    const { key } = await t.service.createApiKey(t.actor, { name: 'herd', role: 'VIEWER' });
    let lookups = 0;
    const db = new Kysely<DB>({
      dialect: new PostgresDialect({ pool: t.database.pool }),
      log: (event) => void (/from "?api_keys"? where "?key_hash/.test(event.query.sql) && lookups++),
    });
    const service = createJobService({ db, defaultMaxAttempts: 5 });
    const actors = await Promise.all(Array.from({ length: 20 }, () => service.authenticate(key)));
    expect(new Set(actors.map((a) => a.keyId)).size).toBe(1);
    // Each its own copy: one request's changes to its actor are not another's.
    expect(new Set(actors).size).toBe(20);
    expect(lookups).toBe(1);
  });

  it('a lookup under way when a key is forgotten is not shared with the requests after it', async () => {
    const { key, apiKey } = await t.service.createApiKey(t.actor, { name: 'forgotten mid-lookup', role: 'VIEWER' });
    // One connection, held here: the first lookup waits for it while the key is forgotten.
    const pool = ownPool({ connectionString: t.url, max: 1, types: pgTypes });
    const held = await pool.connect();
    let lookups = 0;
    const db = new Kysely<DB>({
      dialect: new PostgresDialect({ pool }),
      log: (event) => void (/from "?api_keys"? where "?key_hash/.test(event.query.sql) && lookups++),
    });
    const service = createJobService({ db, defaultMaxAttempts: 5 });
    try {
      const first = service.authenticate(key);
      await eventually(() => pool.waitingCount === 1, 5000, 'the first lookup to wait for the connection');
      // What the key-change notification does: the first lookup may have read the key as it was.
      service.apiKeyChanged(apiKey.id);
      const second = service.authenticate(key);
      held.release();
      await Promise.all([first, second]);
      expect(lookups).toBe(2);
    } finally {
      await pool.end();
    }
  });

  it('refuses a key revoked through the service at once', async () => {
    const { key, apiKey } = await t.service.createApiKey(t.actor, { name: 'revoked here', role: 'VIEWER' });
    await t.service.authenticate(key);
    await t.service.revokeApiKey(t.actor, apiKey.id);
    expect(await codeOf(() => t.service.authenticate(key))).toBe('UNAUTHENTICATED');
  });

  it(`refuses a key revoked elsewhere once what was remembered of it runs out (${KEY_CACHE_TTL_MS} ms)`, async () => {
    const { key, apiKey } = await t.service.createApiKey(t.actor, { name: 'revoked elsewhere', role: 'VIEWER' });
    await t.service.authenticate(key);
    await t.query('update api_keys set revoked_at = now() where id = $1', [apiKey.id]);
    await eventually(async () => (await codeOf(() => t.service.authenticate(key))) === 'UNAUTHENTICATED', 10_000, 'the key to be refused');
  });

  it('never remembers an unknown key', async () => {
    const unknown = `jg_${'x'.repeat(40)}`;
    expect(await codeOf(() => t.service.authenticate(unknown))).toBe('UNAUTHENTICATED');
    expect(await codeOf(() => t.service.authenticate(unknown))).toBe('UNAUTHENTICATED');
  });
});
