/**
 * A worker's presence row at a clean stop: gone, and not brought back by a heartbeat that was on its
 * way when the stop began (its upsert landing after the delete listed a stopped worker in the
 * handler catalogue until it went stale).
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { createPresence } from '../../src/service/engine/runtime/presence.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { ownPool } from '../support/own-pool.js';

let t: TestDb;
let pool: pg.Pool;

beforeAll(async () => {
  t = await createTestDb();
  pool = ownPool({ connectionString: t.url, max: 4 });
});
afterAll(async () => {
  await pool?.end();
  await t?.close();
});

/** Holds every heartbeat's upsert for `ms` once `slow` is set, and tells when one is held. */
function slowUpserts(p: pg.Pool, ms: number) {
  const real = p.query.bind(p) as (...args: unknown[]) => Promise<unknown>;
  const state = { slow: false, held: undefined as Promise<unknown> | undefined };
  let heldOne!: () => void;
  const firstHeld = new Promise<void>((r) => (heldOne = r));
  (p as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args: unknown[]) => {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text: string }).text;
    if (!state.slow || !text.includes('insert into workers')) return real(...args);
    heldOne();
    return (state.held = new Promise((r) => setTimeout(r, ms)).then(() => real(...args)));
  };
  return { state, firstHeld };
}

describe("a worker's presence", () => {
  it('is gone after a clean stop, even with a heartbeat on its way when the stop began', async () => {
    const upserts = slowUpserts(pool, 300);
    const presence = createPresence({ pool, log: createLogger('silent'), id: 'presence-1', registrations: () => [], heartbeatMs: 20 });
    await presence.start();
    const row = () => t.query(`select id from workers where id = 'presence-1'`).then((r) => r.rows);
    expect(await row()).toEqual([{ id: 'presence-1' }]);

    upserts.state.slow = true;
    await upserts.firstHeld;
    await presence.stop();
    // Whatever heartbeat was held has landed by now.
    await upserts.state.held;
    expect(await row()).toEqual([]);
  });
});
