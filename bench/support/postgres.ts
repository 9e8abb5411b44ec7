/**
 * The Postgres server benchmarks run on: BENCH_DATABASE_URL if set, else the local server at
 * 127.0.0.1:5432 (user postgres), else (or with BENCH_EMBEDDED=1) an ephemeral embedded cluster
 * in a temporary folder.
 * Every measurement gets a fresh database, dropped afterwards.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../src/db/embedded.js';
import { createLogger } from '../../src/log.js';
import { onCleanup } from './cleanup.js';

const LOCAL = 'postgres://postgres@127.0.0.1:5432/postgres';

export interface BenchServer {
  /** Where the server came from, for the report. */
  source: 'BENCH_DATABASE_URL' | 'local' | 'embedded';
  /** A fresh, empty database named `<prefix>_<random>`; dropped by `drop()` or at cleanup. */
  createDatabase(prefix: string): Promise<BenchDatabase>;
  close(): Promise<void>;
}

export interface BenchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

async function admin(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end().catch(() => {});
  }
}

export async function openServer(): Promise<BenchServer> {
  let adminUrl: string;
  let source: BenchServer['source'];
  let stop: () => Promise<void> = async () => {};
  if (process.env.BENCH_DATABASE_URL) {
    adminUrl = process.env.BENCH_DATABASE_URL;
    source = 'BENCH_DATABASE_URL';
    if (!(await answers(adminUrl))) throw new Error('BENCH_DATABASE_URL does not answer');
  } else if (process.env.BENCH_EMBEDDED !== '1' && (await answers(LOCAL))) {
    adminUrl = LOCAL;
    source = 'local';
  } else {
    process.stderr.write('bench: starting an embedded Postgres (no server at 127.0.0.1:5432, or BENCH_EMBEDDED=1)\n');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-bench-pg-'));
    fs.chmodSync(dir, 0o755);
    const embedded = await startEmbeddedPostgres({ dataDir: dir, log: createLogger('warn'), ephemeral: true });
    adminUrl = embedded.connectionString;
    source = 'embedded';
    stop = onCleanup('embedded postgres', async () => {
      await embedded.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    });
  }

  return {
    source,
    async createDatabase(prefix) {
      const name = `${prefix}_${randomBytes(4).toString('hex')}`;
      await admin(adminUrl, `create database ${name}`);
      const drop = onCleanup(`database ${name}`, () => admin(adminUrl, `drop database if exists ${name} with (force)`));
      return { name, url: withDatabase(adminUrl, name), drop };
    },
    close: () => stop(),
  };
}
