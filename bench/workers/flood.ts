/**
 * A flood for the bounds bench (bench/bounds.ts), in a process of its own so that its event loop
 * is not the one timing the other key's requests. On `go`, CLIENTS loops post createJob to URL
 * for DURATION_MS, each sending its next request when the last is answered: with KEY, all as that
 * key; with RANDOM=1, each with a new, well-formed key nobody holds. Prints
 * `done <answered 200> <answered 429> <answered otherwise> <ms>`.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { command, envNumber, say } from './protocol.js';

const url = process.env.URL!;
const clients = envNumber('CLIENTS', 50);
const durationMs = envNumber('DURATION_MS', 5_000);
const CREATE = `mutation ($input: CreateJobInput!) { createJob(input: $input) { job { id } } }`;

// The client's own code warmed up first (a few reads of /healthz), so that the flood's opening is
// the gateway's work, not this process compiling undici on the cores the gateway shares.
{
  const warm = new Agent({ connections: 4 });
  for (let n = 0; n < 200; n++) await (await request(new URL('/healthz', url), { dispatcher: warm })).body.text();
  await warm.close();
}
say('ready');
await command('go');
const dispatcher = new Agent({ connections: clients, pipelining: 1 });
const counts = { ok: 0, refused: 0, other: 0 };
let i = 0;
const t0 = performance.now();
await Promise.all(
  Array.from({ length: clients }, async () => {
    while (performance.now() - t0 < durationMs) {
      const key = process.env.RANDOM === '1' ? `jg_${randomBytes(24).toString('base64url')}` : process.env.KEY!;
      const res = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({
          query: CREATE,
          variables: { input: { kind: 'IMMEDIATE', endpointName: 'bench.create', input: { i: i++ } } },
        }),
        dispatcher,
      });
      await res.body.text();
      if (res.statusCode === 200) counts.ok++;
      else if (res.statusCode === 429) counts.refused++;
      else counts.other++;
    }
  }),
);
await dispatcher.close();
say(`done ${counts.ok} ${counts.refused} ${counts.other} ${performance.now() - t0}`);
