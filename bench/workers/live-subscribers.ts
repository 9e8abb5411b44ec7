/**
 * Subscribers for the live fan-out bench (bench/live-fanout.ts), in a process of their own so that
 * their event loop is not the benchmark's. FILE holds `[jobId, eventCursor][]`; each gets a
 * WebSocket of its own to URL (graphql-ws, as KEY) and subscribes to its job's executionUpdates
 * from its cursor, so the replayed PENDING event says the subscription is live. Prints `ready`
 * once every subscription has had it; then, for each later event (RUNNING, SUCCEEDED), the time
 * from the event's `occurredAt` (the writing transaction's start, on the database's clock, which
 * is this machine's) to its arrival here. Prints `done <ms,ms,...>` once EXPECTED events arrived
 * or on `stop`.
 */
import fs from 'node:fs';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { command, envNumber, onEnd, say } from './protocol.js';

const url = process.env.URL!;
const key = process.env.KEY!;
const subscriptions = JSON.parse(fs.readFileSync(process.env.FILE!, 'utf8')) as [string, string][];
const expected = envNumber('EXPECTED', subscriptions.length * 2);
/** Connections opening at once; the rest wait for one of them to be live. */
const OPENING = 100;

const QUERY = `subscription ($job: ID!, $after: String) { executionUpdates(jobId: $job, after: $after) { status occurredAt } }`;
const clients: Client[] = [];
const latencies: number[] = [];
let live = 0;
let finished: () => void = () => {};
const allArrived = new Promise<void>((resolve) => (finished = resolve));

onEnd(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
});

function subscribe([jobId, after]: [string, string]): Promise<void> {
  const client = createClient({ url, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${key}` }, retryAttempts: 0 });
  clients.push(client);
  return new Promise<void>((resolve, reject) => {
    client.subscribe<{ executionUpdates: { status: string; occurredAt: string } }>(
      { query: QUERY, variables: { job: jobId, after } },
      {
        next: ({ data }) => {
          const arrived = Date.now();
          const event = data!.executionUpdates;
          if (event.status === 'PENDING') {
            live++;
            return resolve();
          }
          latencies.push(arrived - Date.parse(event.occurredAt));
          if (latencies.length === expected) finished();
        },
        error: (e) => reject(new Error(`subscription of job ${jobId}: ${JSON.stringify(e)}`)),
        complete: () => {},
      },
    );
  });
}

let next = 0;
await Promise.all(
  Array.from({ length: OPENING }, async () => {
    while (next < subscriptions.length) await subscribe(subscriptions[next++]!);
  }),
);
say(`ready ${live}`);
await Promise.race([allArrived, command('stop')]);
say(`done ${latencies.join(',')}`);
