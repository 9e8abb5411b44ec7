/**
 * A server process for the createJob benchmark, so the load generator's CPU is not the server's.
 * env SERVER:
 *  - `jobgate`: the real gateway (startGateway: body limit, authentication by API key, yoga,
 *    armor, resolvers, service, SQL) on DATABASE_URL, with a HANDLER endpoint `bench.create`
 *    and KEYS ADMIN keys (default 1). Prints `ready <url> <key>...`. BOUNDS=off turns the
 *    bounds on load off (a bench measuring one key's throughput); else they are the defaults.
 *    REFUSAL_HOLD_MS sets how long a refusal answered before the request was read is held.
 *  - `yoga`: bare graphql-yoga answering `{ __typename }` over node:http, nothing else. Prints
 *    `ready <url>`.
 *  - `graphile`: graphile-worker's `addJob` through its own API (makeWorkerUtils) on
 *    DATABASE_URL; on `go`, CLIENTS callers add jobs for DURATION_MS. Prints `done <n> <ms>`.
 */
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { createSchema, createYoga } from 'graphql-yoga';
import { makeWorkerUtils } from 'graphile-worker';
import { createDatabase } from '../../src/db/pool.js';
import { createLogger } from '../../src/log.js';
import { startGateway } from '../../src/server/gateway.js';
import { createJobService } from '../../src/service/index.js';
import { command, envNumber, onEnd, say } from './protocol.js';

const server = process.env.SERVER;
const url = process.env.DATABASE_URL!;

if (server === 'jobgate') {
  const database = createDatabase({ connectionString: url, max: 10 });
  const service = createJobService({ db: database.db, pool: database.pool, defaultMaxAttempts: 5 });
  const keys: string[] = [];
  for (let k = 0; k < envNumber('KEYS', 1); k++) keys.push((await service.bootstrapKey('default', 'ADMIN', `bench ${k}`, false)).key);
  const actor = await service.authenticate(keys[0]);
  await service.registerEndpoint(actor, { name: 'bench.create', kind: 'HANDLER', handlerName: 'noop' });
  const gateway = await startGateway({
    service,
    log: createLogger('warn'),
    host: '127.0.0.1',
    port: 0,
    authenticate: (request) => service.authenticate(/^Bearer (.+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
    bounds:
      process.env.BOUNDS === 'off'
        ? {
            requestsPerSecond: 0,
            requestsInFlightPerKey: 0,
            connectionsPerKey: 0,
            subscriptionsPerKey: 0,
            subscriptionsPerConnection: 0,
            failedAuthPerMinute: 0,
            connectionsPerAddress: 0,
          }
        : process.env.IN_FLIGHT !== undefined
          ? { requestsInFlightPerKey: Number(process.env.IN_FLIGHT) }
          : undefined,
    refusalHoldMs: process.env.REFUSAL_HOLD_MS === undefined ? undefined : Number(process.env.REFUSAL_HOLD_MS),
  });
  onEnd(async () => {
    await gateway.close();
    await database.close();
  });
  say(`ready ${gateway.url} ${keys.join(' ')}`);
} else if (server === 'yoga') {
  const yoga = createYoga({ schema: createSchema({ typeDefs: 'type Query { ok: Boolean }' }), logging: false, graphiql: false });
  const http = createServer(yoga);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const address = http.address() as { port: number };
  onEnd(async () => void http.close());
  say(`ready http://127.0.0.1:${address.port}/graphql`);
} else if (server === 'graphile') {
  const clients = envNumber('CLIENTS', 50);
  const durationMs = envNumber('DURATION_MS', 10_000);
  const utils = await makeWorkerUtils({ connectionString: url });
  await utils.migrate();
  onEnd(async () => utils.release());
  say('ready');
  await command('go');
  let n = 0;
  const t0 = performance.now();
  const until = t0 + durationMs;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < until) {
        await utils.addJob('noop', { n });
        n++;
      }
    }),
  );
  say(`done ${n} ${performance.now() - t0}`);
} else {
  throw new Error(`SERVER must be jobgate, yoga or graphile, not ${server}`);
}
