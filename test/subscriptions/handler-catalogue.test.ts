/**
 * handlerCatalog: the handler catalogue pushed live over graphql-ws, from the catalogue's own
 * tables' hints (migration 000029): workers registering, going stale without a write, and
 * stopping; interval ticks and their outcomes; shown as the catalogue query shows it to the key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { collect, startLiveGateway, type LiveGateway } from '../support/live.js';

let t: TestDb;
let live: LiveGateway;
let adminKey: string;
let viewerKey: string;

beforeAll(async () => {
  t = await createTestDb();
  live = await startLiveGateway(t, { hub: { checkEveryMs: 500, probeTimeoutMs: 500 } });
  adminKey = (await t.service.bootstrapKey('default', 'ADMIN', 'catalog admin')).key;
  viewerKey = (await t.service.createApiKey(t.actor, { name: 'catalog viewer', role: 'VIEWER' })).key;
});
afterAll(async () => {
  await live.close();
  await t.close();
});

const FIELDS = `kind name workers { id host } interval { nextDueAt okRuns errorRuns running } lastOutcome { status message cause }`;
const CATALOG = `subscription($kind: HandlerKind) { handlerCatalog(kind: $kind) { handlers { ${FIELDS} } } }`;

interface Entry {
  kind: string;
  name: string;
  workers: { id: string; host: string | null }[];
  interval: { nextDueAt: string | null; okRuns: number; errorRuns: number; running: boolean } | null;
  lastOutcome: { status: string; message: string | null; cause: string | null } | null;
}
type Pushed = { handlers: Entry[] };

const named = (items: Pushed[], name: string) => items.at(-1)?.handlers.find((h) => h.name === name);

async function registerWorker(id: string, handlers: unknown[], staleMs = 60_000) {
  await t.query(`insert into workers (id, host, pid, stale_ms, handlers) values ($1, 'catalog-host', 1, $2, $3)`, [
    id,
    staleMs,
    JSON.stringify(handlers),
  ]);
}

async function queried(key: string): Promise<Entry[]> {
  const res = await fetch(live.httpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query: `{ handlerConnection(first: 100, kind: INTERVAL) { nodes { ${FIELDS} } } }` }),
  });
  const body = (await res.json()) as { data: { handlerConnection: { nodes: Entry[] } } };
  return body.data.handlerConnection.nodes;
}

describe('handlerCatalog', () => {
  it('pushes the catalogue at once, then as workers register and stop and as interval ticks are taken and end', async () => {
    const sub = collect<Pushed>(live.client(adminKey), CATALOG, { kind: 'INTERVAL' });
    await sub.until((items) => items.length >= 1, 10_000, 'the catalogue at once');
    expect(named(sub.items, 'catalog.tick')).toBeUndefined();

    await registerWorker('catalog-worker-1', [{ kind: 'INTERVAL', name: 'catalog.tick', everyMs: 60_000 }]);
    await t.query(
      `insert into interval_handlers (name, every_ms, next_due_at) values ('catalog.tick', 60000, now() + interval '1 minute')`,
    );
    await sub.until((items) => named(items, 'catalog.tick')?.interval?.okRuns === 0, 10_000, 'the new worker and its handler');
    expect(named(sub.items, 'catalog.tick')!.workers).toHaveLength(1);

    // A tick taken (running), then its outcome recorded (counts, last outcome, next tick moved).
    await t.query(
      `update interval_handlers set owner = 'catalog-worker-1', epoch = epoch + 1, run_started_at = now() where name = 'catalog.tick'`,
    );
    await sub.until((items) => named(items, 'catalog.tick')?.interval?.running === true, 10_000, 'the tick running');
    await t.query(
      `update interval_handlers set owner = null, run_started_at = null, last_status = 'ERROR', last_cause = 'HANDLER', last_error = 'boom',
         last_started_at = now(), last_finished_at = now(), error_runs = error_runs + 1, next_due_at = now() + interval '2 minutes'
       where name = 'catalog.tick'`,
    );
    const ended = await sub.until((items) => named(items, 'catalog.tick')?.interval?.errorRuns === 1, 10_000, 'the outcome');
    expect(named(ended, 'catalog.tick')!.lastOutcome).toMatchObject({ status: 'ERROR', cause: 'HANDLER' });
    expect(named(ended, 'catalog.tick')!.interval!.running).toBe(false);

    // What the catalogue query answers this key, the subscription pushed.
    expect(sub.items.at(-1)!.handlers).toEqual(await queried(adminKey));

    await t.query(`delete from workers where id = 'catalog-worker-1'`);
    await sub.until((items) => named(items, 'catalog.tick') === undefined, 10_000, 'the handler gone with its worker');
    sub.stop();
  });

  it('drops a worker that stops heartbeating, though nothing is written when it goes stale', async () => {
    const sub = collect<Pushed>(live.client(adminKey), CATALOG, { kind: 'INTERVAL' });
    // The worker's stale clock starts last: once the subscription has pushed its first catalogue
    // and the handler's row exists, so that all the time before it goes stale is the
    // catalogue's to show it. 8 s: on a loaded machine (CI's second pass, a browser test beside
    // it) 4 s from registering went by before the catalogue first read the worker.
    await sub.until((items) => items.length > 0, 10_000, 'the first catalogue');
    await t.query(
      `insert into interval_handlers (name, every_ms, next_due_at) values ('catalog.quiet', 60000, now() + interval '1 minute')`,
    );
    await registerWorker('catalog-worker-stale', [{ kind: 'INTERVAL', name: 'catalog.quiet', everyMs: 60_000 }], 8000);
    await sub.until((items) => named(items, 'catalog.quiet') !== undefined, 20_000, 'the worker');
    await sub.until((items) => named(items, 'catalog.quiet') === undefined, 20_000, 'the stale worker left out');
    sub.stop();
  });

  it("shows a workspace's key the catalogue as the query shows it: no hosts, no handler error text", async () => {
    await registerWorker('catalog-worker-2', [{ kind: 'INTERVAL', name: 'catalog.tick', everyMs: 60_000 }]);
    const sub = collect<Pushed>(live.client(viewerKey), CATALOG, { kind: 'INTERVAL' });
    const items = await sub.until((items) => named(items, 'catalog.tick') !== undefined, 10_000, 'the catalogue');
    const entry = named(items, 'catalog.tick')!;
    expect(entry.workers.every((w) => w.host === null && w.id !== 'catalog-worker-2')).toBe(true);
    expect(entry.lastOutcome).toMatchObject({ status: 'ERROR', message: null });
    expect(items.at(-1)!.handlers).toEqual(await queried(viewerKey));
    sub.stop();
  });

  it('refuses a bad filter with VALIDATION_FAILED', async () => {
    const sub = collect(live.client(adminKey), `subscription { handlerCatalog(name: "${'x'.repeat(300)}") { handlers { name } } }`);
    await expect.poll(() => sub.errors.length, { timeout: 10_000 }).toBeGreaterThan(0);
    expect(JSON.stringify(sub.errors)).toContain('VALIDATION_FAILED');
  });
});
