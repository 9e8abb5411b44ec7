/**
 * Reads from a real streaming replica (JOBGATE_READ_DATABASE_URL): a GraphQL query's lists (and
 * the connections their rows hold) come from the replica while it is within its staleness bound (JOBGATE_READ_MAX_LAG_MS); a key reads
 * its own writes (its mutation's answer, and its queries for the bound after it, from the primary);
 * and once the replica lags past the bound (its replay paused) every read goes to the primary.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type RunningApp } from '../../src/app.js';
import { createDatabase } from '../../src/db/pool.js';
import { parseConfig } from '../../src/environment.js';
import { createLogger } from '../../src/log.js';
import { createJobService } from '../../src/service/index.js';
import { eventually } from '../support/eventually.js';
import { postGraphql } from '../support/graphql.js';
import { startReplicatedPostgres, type ReplicatedPostgres } from '../support/replica.js';

/** Long enough that a read right after the replay stopped is surely within it, on a busy machine. */
const MAX_LAG_MS = 8_000;

let pair: ReplicatedPostgres;
let app: RunningApp;
let keys: { writer: string; reader: string };

beforeAll(async () => {
  pair = await startReplicatedPostgres();
  const admin = new pg.Client({ connectionString: pair.primaryUrl('postgres') });
  await admin.connect();
  await admin.query('create database jobgate');
  await admin.end();
  const config = parseConfig({
    DATABASE_URL: pair.primaryUrl('jobgate'),
    JOBGATE_READ_DATABASE_URL: pair.replicaUrl('jobgate'),
    JOBGATE_READ_MAX_LAG_MS: String(MAX_LAG_MS),
    PORT: '0',
  });
  // A gateway alone: nothing runs the jobs, so what the lists show changes only when the test writes.
  app = await startApp({ config, log: createLogger('silent'), roles: { gateway: true, worker: false } });
  const direct = createDatabase({ connectionString: pair.primaryUrl('jobgate'), max: 2 });
  const service = createJobService({ db: direct.db, pool: direct.pool, defaultMaxAttempts: 1 });
  keys = {
    writer: (await service.bootstrapKey('default', 'ADMIN', 'writer')).key,
    reader: (await service.bootstrapKey('default', 'ADMIN', 'reader')).key,
  };
  await direct.close();
}, 120_000);

afterAll(async () => {
  await app?.stop();
  await pair?.stop();
});

const gql = (key: string, query: string, variables: Record<string, unknown> = {}) => postGraphql(app.url, key, query, variables);

const listed = async (key: string): Promise<string[]> =>
  (await gql(key, '{ jobs(first: 100) { nodes { id } } }')).jobs.nodes.map((n: { id: string }) => n.id);

/** The jobs the endpoint's nested connection lists (read together with other rows' first pages). */
const nested = async (key: string): Promise<string[]> =>
  (await gql(key, '{ endpoints(first: 5) { nodes { name jobs(first: 10) { nodes { id } } } } }')).endpoints.nodes
    .filter((e: { name: string }) => e.name === 'replica.e')
    .flatMap((e: { jobs: { nodes: { id: string }[] } }) => e.jobs.nodes.map((n) => n.id));

const create = async (key: string): Promise<string> =>
  (await gql(key, `mutation { createJob(input: { kind: IMMEDIATE, endpointName: "replica.e", input: {} }) { job { id status } } }`))
    .createJob.job.id;

describe('reads from a streaming replica', () => {
  it('lists from the replica within the bound; a writer reads its own writes; past the bound, from the primary', async () => {
    await gql(keys.writer, `mutation { registerEndpoint(input: { name: "replica.e", kind: HANDLER, handlerName: "h" }) { id } }`);
    const first = await create(keys.writer);
    // Replayed within moments: the reader (which never wrote) sees it.
    await eventually(async () => (await listed(keys.reader)).includes(first), 15_000, 'the replica to show the first job');

    await pair.pauseReplay();
    try {
      const second = await create(keys.writer);
      // The reader's list is the replica's, which stopped before the second job: it is not there yet.
      expect(await listed(keys.reader)).not.toContain(second);
      expect(await listed(keys.reader)).toContain(first);
      // So are the connections a list's rows hold.
      expect(await nested(keys.reader)).toEqual([first]);
      // The writer wrote within the bound: its lists are the primary's, its own job in them.
      expect(await listed(keys.writer)).toContain(second);
      expect(await nested(keys.writer)).toEqual([second, first]);
      // The replica now falls further behind; once past the bound, the reader's lists are the primary's.
      await eventually(async () => (await listed(keys.reader)).includes(second), MAX_LAG_MS + 15_000, 'reads to go to the primary');
    } finally {
      await pair.resumeReplay();
    }
  });
});
