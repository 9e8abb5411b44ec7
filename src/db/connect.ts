/**
 * Where the database comes from: DATABASE_URL when set, else the embedded Postgres in the data
 * folder (with a `jobgate` database created on first start).
 */
import pg from 'pg';
import type { Config } from '../environment.js';
import type { Logger } from '../log.js';
import { startEmbeddedPostgres } from './embedded.js';
import { pgTypes } from './pg-types.js';

export interface DatabaseSource {
  connectionString: string;
  embedded: boolean;
  /** Resolves if the embedded server exits on its own; never for an external server. */
  lost: Promise<void>;
  stop(): Promise<void>;
}

export async function ensureDatabase(serverUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: 10_000, types: pgTypes });
  client.on('error', () => {}); // the query in flight fails with it; see migrate.ts
  await client.connect();
  try {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (!rowCount) await client.query(`create database ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}

export async function openDatabaseSource(config: Config, log: Logger): Promise<DatabaseSource> {
  if (config.databaseUrl) {
    return { connectionString: config.databaseUrl, embedded: false, lost: new Promise(() => {}), stop: async () => {} };
  }
  const server = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.embeddedPort, log });
  try {
    await ensureDatabase(server.connectionString, 'jobgate');
  } catch (error) {
    await server.stop();
    throw error;
  }
  return { connectionString: server.urlFor('jobgate'), embedded: true, lost: server.exited, stop: () => server.stop() };
}
