/**
 * A library-mode worker exactly as docs/library-mode.md shows one (`createJobgate` + `handle` +
 * `startWorker`), and nothing else holding its process open: no server, no timer of its own.
 * Its handler `sleep` waits `input.ms` without touching the database, so an outage costs it
 * nothing but the recording of its outcomes.
 *
 * env: DATABASE_URL, WORKER_ID, LEASE_MS, HEARTBEAT_MS, CONCURRENCY, JOBGATE_OUTBOUND_ALLOW.
 * Prints "ready" on stdout once started; logs (info) on stderr; SIGTERM stops it (exit 0).
 */
import { createJobgate } from '../../src/index.js';
import { createLogger } from '../../src/log.js';

const env = (name: string, def = '') => process.env[name] ?? def;
const gate = await createJobgate({ databaseUrl: env('DATABASE_URL'), migrate: false, log: createLogger('info') });
gate.handle<{ ms?: number }>('sleep', async (input) => {
  await new Promise((r) => setTimeout(r, input.ms ?? 0));
});
const worker = await gate.startWorker({
  workerId: env('WORKER_ID', `library-${process.pid}`),
  concurrency: Number(env('CONCURRENCY', '4')),
  leaseMs: Number(env('LEASE_MS', '30000')),
  heartbeatMs: Number(env('HEARTBEAT_MS', '10000')),
  outboundAllow: env('JOBGATE_OUTBOUND_ALLOW').split(',').filter(Boolean),
});
process.stdout.write('ready\n');

process.once('SIGTERM', () => {
  void worker
    .stop({ graceMs: 5000 })
    .then(() => gate.close())
    .then(
      () => process.exit(0),
      () => process.exit(1),
    );
});
