/**
 * A runner of the recoverable handler `scan` in its own process, for tests that SIGKILL it.
 * `scan` walks ids 0..params.n-1 in batches of params.batch, recording a finding for every
 * multiple of 7, checkpointing after each batch and sleeping params.ms per batch. It notes each
 * batch it starts in `scan_batches`, and each recordFinding that answered "new" in `finding_news`.
 * env: DATABASE_URL, STALE_MS. Prints "ready".
 */
import { createLogger } from '../../src/log.js';
import { outcome, RecoverableRegistry } from '../../src/service/engine/runs/recoverable.js';
import { createRunner } from '../../src/service/engine/runs/runner.js';
import pg from 'pg';
import { pgTypes } from '../../src/db/pg-types.js';

// Read as jobgate's own pools read (src/db/pg-types.ts): the runner's statements go through it.
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 5, types: pgTypes });
const registry = new RecoverableRegistry();
registry.register({
  name: 'scan',
  async run(store, params: { n: number; batch: number; ms: number }) {
    let cursor = ((await store.loadCursor()) as { next: number } | null)?.next ?? 0;
    while (cursor < params.n) {
      if ((await store.status()) === 'CANCEL_REQUESTED') return outcome.paused({ next: cursor });
      const end = Math.min(params.n, cursor + params.batch);
      await pool.query('insert into scan_batches (run_id, start_id, pid) values ($1, $2, $3)', [store.runId, cursor, process.pid]);
      for (let id = cursor; id < end; id++) {
        if (id % 7 === 0 && (await store.recordFinding({ kind: 'multiple-of-seven', severity: 'INFO', resourceId: String(id) }))) {
          await pool.query('insert into finding_news (run_id, resource_id, pid) values ($1, $2, $3)', [
            store.runId,
            String(id),
            process.pid,
          ]);
        }
      }
      await new Promise((r) => setTimeout(r, params.ms));
      await store.checkpoint({ next: end }, { processed: end - cursor, total: params.n, stats: { batches: 1 } });
      cursor = end;
    }
    return outcome.completed();
  },
});
const runner = createRunner({
  pool,
  registry,
  log: createLogger('warn'),
  heartbeatMs: 200,
  staleMs: Number(process.env.STALE_MS ?? 1000),
  pollMs: 100,
});
await runner.start();
process.stdout.write('ready\n');
