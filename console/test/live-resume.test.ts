/**
 * The console's live connection (src/lib/live.ts) against a real gateway over a real socket: it
 * reports "reconnecting" while the socket is down, resumes its subscriptions from the last
 * cursor (the events of the outage arrive, none twice), and signs out on 4403.
 */
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../test/support/db.js';
import { eventually } from '../../test/support/engine.js';
import { startLiveGateway, type LiveGateway } from '../../test/support/live.js';
import type { TypedDocumentString } from '../src/gql/graphql.ts';
import { createLive, type LiveState } from '../src/lib/live.ts';

let t: TestDb;
let g: LiveGateway;
beforeAll(async () => {
  t = await createTestDb();
  g = await startLiveGateway(t);
  await t.service.registerEndpoint(t.actor, { name: 'live.idle', kind: 'HANDLER', handlerName: 'nobody' });
});
afterAll(async () => {
  await g.close();
  await t.close();
});

const UPDATES = {
  toString: () => 'subscription ($after: String) { executionUpdates(after: $after) { cursor executionId status } }',
} as unknown as TypedDocumentString<
  { executionUpdates: { cursor: string; executionId: string; status: string } },
  { after?: string | null }
>;

/** A WebSocket whose connections can be held down (they go to a closed port) and cut. */
function gatedSockets() {
  const gate = { down: false, open: [] as WebSocket[] };
  class Gated extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(gate.down ? 'ws://127.0.0.1:1/graphql' : url, protocols);
      gate.open.push(this);
    }
  }
  return { gate, Gated };
}

describe('the live connection', () => {
  it("shows reconnecting while down, then resumes after the last cursor: the outage's events arrive once each", async () => {
    const { key } = await t.service.bootstrapKey('default', 'ADMIN', 'live resume');
    const { gate, Gated } = gatedSockets();
    const states: LiveState[] = [];
    const live = createLive({ url: g.wsUrl, key, onSignOut: () => states.push('signedOut'), webSocketImpl: Gated });
    live.onState((s) => states.push(s));
    let reconnected = 0;
    live.onReconnected(() => reconnected++);
    const seen: string[] = [];
    await eventually(async () => live.state === 'live');
    const stop = live.subscribe(
      UPDATES,
      {},
      { next: (d) => seen.push(d.executionUpdates.executionId), cursor: (d) => d.executionUpdates.cursor },
    );
    const job = async () => (await t.service.createJob(t.actor, { endpointName: 'live.idle', kind: 'IMMEDIATE' })).job.id;
    const jobs = [await job()];
    await eventually(async () => seen.length === 1);
    jobs.push(await job());
    await eventually(async () => seen.length === 2);

    gate.down = true;
    for (const s of gate.open) s.terminate();
    await eventually(async () => live.state === 'reconnecting');
    // Two events while no socket is open.
    jobs.push(await job(), await job());
    gate.down = false;
    await eventually(async () => live.state === 'live' && seen.length === 4, 15_000, 'the outage events');
    jobs.push(await job());
    await eventually(async () => seen.length === 5);
    const byJob = (await t.query(`select id, job_id from executions`)).rows as { id: string; job_id: string }[];
    expect(seen).toEqual(jobs.map((j) => byJob.find((r) => r.job_id === j)!.id));
    expect(states).toContain('reconnecting');
    expect(states.at(-1)).toBe('live');
    expect(reconnected).toBe(1);
    stop();
    live.dispose();
  });

  it('signs out when the key is revoked (close 4403), and does not reconnect', async () => {
    const { key, apiKey } = await t.service.createApiKey(t.actor, { name: 'live revoked', role: 'VIEWER' });
    const reasons: string[] = [];
    const live = createLive({ url: g.wsUrl, key, onSignOut: (r) => reasons.push(r), webSocketImpl: WebSocket });
    await eventually(async () => live.state === 'live');
    await t.service.revokeApiKey(t.actor, apiKey.id);
    await eventually(async () => reasons.length === 1);
    expect(live.state).toBe('signedOut');
    expect(reasons[0]).toMatch(/revoked/);
    live.dispose();
  });
});
