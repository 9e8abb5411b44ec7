/**
 * After each test file: fail it if it left something running. Two views, both cheap:
 *
 * - what test/support made for it and nothing closed (a test database and its pool, a worker, a
 *   gateway: ./tracked.ts), by name;
 * - what keeps this process alive that did not before the file ran (`process.getActiveResourcesInfo()`):
 *   a server, a socket (a pool's connection, a client's), a child process or its pipes, a
 *   timer that is not unref'd. A socket the other side is closing may take a moment to go, so
 *   the check waits for the count to come back down before it fails (a clean file waits not at all).
 *
 * Registered in every project's setupFiles; its afterAll runs after the file's own (hooks run
 * in reverse order of registration), so the file's cleanup has run.
 */
import { afterAll, beforeAll } from 'vitest';
import { takeStillOpen } from './tracked.js';

/** Requests in flight, not things left running: they end by themselves. */
const TRANSIENT = new Set([
  'FSReqCallback',
  'FSReqPromise',
  'FileHandleCloseReq',
  'GetAddrInfoReqWrap',
  'Immediate',
  'TTYWrap',
  'ShutdownWrap',
  'WriteWrap',
]);
const GRACE_MS = 5000;

function counts(): Map<string, number> {
  const byKind = new Map<string, number>();
  for (const kind of process.getActiveResourcesInfo()) if (!TRANSIENT.has(kind)) byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
  return byKind;
}

function grown(before: Map<string, number>): string[] {
  const now = counts();
  return [...now].filter(([kind, n]) => n > (before.get(kind) ?? 0)).map(([kind, n]) => `${n - (before.get(kind) ?? 0)} × ${kind}`);
}

let baseline = new Map<string, number>();
beforeAll(() => {
  baseline = counts();
});

afterAll(async () => {
  const notClosed = takeStillOpen();
  if (notClosed.length > 0) throw new Error(`the file left running what test/support made for it: ${notClosed.join(', ')}`);
  let extra = grown(baseline);
  for (const until = Date.now() + GRACE_MS; extra.length > 0 && Date.now() < until; extra = grown(baseline)) {
    await new Promise((r) => setTimeout(r, 50));
  }
  if (extra.length > 0) {
    throw new Error(
      `the file left running (beyond what ran before it, ${GRACE_MS} ms after its last hook): ${extra.join(', ')}. ` +
        'Close servers, pools, clients and workers and end child processes in afterEach/afterAll; unref or clear timers.',
    );
  }
});
