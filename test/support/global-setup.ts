/**
 * Once per run: a Postgres server (the one at TEST_DATABASE_URL, else an embedded one in a
 * temporary folder) and a template database migrated once. Each test file clones the template.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.js';
import { migrate } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgServerUrl: string;
    pgTemplate: string;
    pgMode: 'embedded' | 'external';
  }
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

interface Server {
  serverUrl: string;
  template: string;
  mode: 'embedded' | 'external';
  stop(): Promise<void>;
}

/**
 * The database and process groups (vitest projects) each list this file; both share one server
 * and one template. Each project loads its global setup apart from the other's (its own module
 * instance), in the one vitest process: what they share lives on globalThis.
 */
const SHARED = Symbol.for('jobgate.test.server');
interface Shared {
  server: Promise<Server>;
  users: number;
}

async function startServer(): Promise<Server> {
  let embedded: EmbeddedPostgres | undefined;
  let tmp: string | undefined;
  let serverUrl = process.env.TEST_DATABASE_URL;
  const template = `jobgate_tpl_${process.pid}`;
  try {
    if (!serverUrl) {
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-test-pg-'));
      fs.chmodSync(tmp, 0o755);
      embedded = await startEmbeddedPostgres({ dataDir: tmp, log: createLogger('warn'), ephemeral: true });
      serverUrl = embedded.connectionString;
    }
    const admin = new pg.Client({ connectionString: serverUrl });
    admin.on('error', () => {});
    try {
      await admin.connect();
      await admin.query(`drop database if exists ${template}`);
      await admin.query(`create database ${template}`);
    } finally {
      await admin.end().catch(() => {});
    }
    await migrate(withDatabase(serverUrl, template));
  } catch (error) {
    // Without a database no test can run: say why in one line, instead of vitest's stack trace
    // of this file followed by every test file's failure. A cluster that failed to start keeps
    // its folder, so the log the message names can still be read.
    await embedded?.stop().catch(() => {});
    const where = process.env.TEST_DATABASE_URL ? 'the server at TEST_DATABASE_URL' : 'an embedded Postgres';
    const reason = (error instanceof Error ? error.message : String(error)).split('\n')[0];
    process.stderr.write(`\njobgate tests: cannot run: no database (${where}): ${reason}\n\n`);
    process.exit(1);
  }
  const url = serverUrl;
  return {
    serverUrl: url,
    template,
    mode: embedded ? 'embedded' : 'external',
    async stop() {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query(`drop database if exists ${template} with (force)`).catch(() => {});
      await c.end();
      await embedded?.stop();
      if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    },
  };
}

export default async function setup(project: TestProject) {
  const registry = globalThis as { [SHARED]?: Shared };
  const shared = (registry[SHARED] ??= { server: startServer(), users: 0 });
  shared.users++;
  const server = await shared.server;
  project.provide('pgServerUrl', server.serverUrl);
  project.provide('pgTemplate', server.template);
  project.provide('pgMode', server.mode);

  return async () => {
    if (--shared.users > 0) return;
    delete registry[SHARED];
    await server.stop();
  };
}
