/**
 * One jobgate process: database (embedded or external), migrations, service, gateway. The CLI
 * runs this; tests start it in child processes.
 */
import type { Config } from './config.js';
import { openDatabaseSource, type DatabaseSource } from './db/connect.js';
import { migrate } from './db/migrate.js';
import { createDatabase, type Database } from './db/pool.js';
import { findWorkspaceBySlug } from './db/repos/workspaces.js';
import type { Logger } from './log.js';
import { startGateway, type RunningGateway } from './server/gateway.js';
import type { Actor } from './service/actor.js';
import { createJobService } from './service/index.js';

export interface RunningApp {
  url: string;
  connectionString: string;
  stop(): Promise<void>;
  /** Resolves when the app must stop on its own (its embedded database went away). */
  lost: Promise<void>;
}

export async function startApp(config: Config, log: Logger): Promise<RunningApp> {
  const source: DatabaseSource = await openDatabaseSource(config, log);
  let database: Database | undefined;
  let gateway: RunningGateway | undefined;
  const stop = async () => {
    await gateway?.close();
    await database?.close();
    await source.stop();
  };
  try {
    const { applied } = await migrate(source.connectionString, { log: (m) => log.info(m) });
    if (applied.length === 0) log.info('migrations: up to date');
    database = createDatabase({ connectionString: source.connectionString, max: config.poolMax }, (m) => log.warn(m));
    const service = createJobService({ db: database.db, defaultMaxAttempts: config.defaultMaxAttempts });
    const ws = await findWorkspaceBySlug(database.db, 'default');
    if (!ws) throw new Error('the default workspace is missing; the database was not migrated by jobgate');
    // Until API keys exist every request acts in the default workspace.
    const actor: Actor = { workspaceId: ws.id, kind: 'user', role: 'ADMIN' };
    gateway = await startGateway({
      service,
      authenticate: async () => actor,
      log,
      host: config.host,
      port: config.port,
    });
    log.info(`gateway: GraphQL and GraphiQL at ${gateway.url}`);
    return { url: gateway.url, connectionString: source.connectionString, stop, lost: source.lost };
  } catch (error) {
    await stop().catch(() => {});
    throw error;
  }
}
