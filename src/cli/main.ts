/**
 * `jobgate <command>`: start | serve | worker | migrate | schema | keys create | db url | reset.
 * What each accepts and reads: ./commands.ts. Exit codes: 0 ok, 1 failure, 2 usage.
 */
import fs from 'node:fs';
import { createInterface } from 'node:readline';
import { parseConfig, ConfigError, type Config } from '../environment.js';
import { openDatabaseSource } from '../db/connect.js';
import { describeApplied, migrate } from '../db/migrate.js';
import { EmbeddedPostgresInterrupted } from '../db/embedded.js';
import { createLogger, logFormatFor, type Logger } from '../log.js';
import { parseArgs } from './commands.js';
import { outliveClosedOutput, printOut } from './output.js';
import type { DatabaseSource } from '../db/connect.js';

/**
 * How the process answers SIGINT and SIGTERM, from the first moment: one that arrives during
 * start (initdb can take seconds) stops the process cleanly once start has settled, instead of
 * killing it half-way and leaving the embedded Postgres running behind it. What a stop does
 * changes as the command goes on (`onStop`); a stop asked for before that is remembered.
 *
 * A second one (an impatient second Ctrl-C during the grace period) is `onForce`: stop now. It
 * used to fall to Node's default handler, which killed the process at once and left the embedded
 * Postgres running, orphaned, until the next start found it.
 */
function createSignals() {
  let received = 0;
  const signals = {
    requested: undefined as { why: string; code: number } | undefined,
    /** Ends a start-up that is waiting for its database to answer. */
    starting: new AbortController(),
    onStop: (why: string, code: number): void => {
      signals.requested ??= { why, code };
      signals.starting.abort(new Error(`interrupted (${why})`));
    },
    /**
     * A signal after the first. Until the command says otherwise (a started gateway or worker
     * stops its embedded Postgres first), the process exits at once: a start waiting on a lock or
     * a database that does not answer may not see the first one for a long time. The exit hook of
     * the embedded server (src/db/embedded.ts) still sends a running Postgres its fast shutdown.
     */
    onForce: (why: string): void => {
      process.stderr.write(`jobgate: ${why} again: exiting now\n`);
      process.exit(1);
    },
  };
  for (const name of ['SIGINT', 'SIGTERM'] as const)
    process.on(name, () => (received++ === 0 ? signals.onStop(name, 0) : signals.onForce(name)));
  return signals;
}
type Signals = ReturnType<typeof createSignals>;

/** One-shot work on a database: a signal stops the source (the embedded server) and fails the command. */
async function untilInterrupted(
  signals: Signals,
  log: Logger,
  command: string,
  source: DatabaseSource,
  work: () => Promise<number>,
): Promise<number> {
  const interrupted = new Promise<string>((resolve) => {
    signals.onStop = (why) => resolve(why);
    if (signals.requested) resolve(signals.requested.why);
  });
  try {
    // The work left running fails once its server stops; the race has already handled it.
    const outcome = await Promise.race([work().then((code) => ({ code })), interrupted.then((why) => ({ why }))]);
    if ('why' in outcome) {
      log.error(`${command}: interrupted (${outcome.why})`);
      return 1;
    }
    return outcome.code;
  } finally {
    await source.stop();
  }
}

/** The package's version, from the package.json beside dist/ (or src/). */
function version(): string {
  return (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/** Asks on the terminal (or reads a line from stdin); true for "y" or "yes". */
async function confirm(question: string): Promise<boolean> {
  process.stderr.write(question);
  const lines = createInterface({ input: process.stdin });
  try {
    for await (const line of lines) return /^\s*y(es)?\s*$/i.test(line);
    return false;
  } finally {
    lines.close();
  }
}

/** `jobgate reset`: the embedded data removed, wherever it lives, once confirmed. */
async function resetCommand(config: Config, log: Logger, yes: boolean): Promise<number> {
  const { embeddedState, removeEmbeddedData } = await import('../db/embedded-files.js');
  const state = embeddedState(config.dataDir);
  if (state.holder !== undefined) {
    process.stderr.write(
      `jobgate: reset: jobgate (pid ${state.holder}) is running on the embedded Postgres in ${state.dataDir}; stop it first\n`,
    );
    return 1;
  }
  if (state.paths.length === 0) {
    process.stdout.write(`nothing to remove: no embedded Postgres data for ${state.dataDir}\n`);
    return 0;
  }
  if (config.databaseUrl) process.stderr.write('DATABASE_URL is set: nothing on that server is touched.\n');
  process.stderr.write(`This removes the embedded Postgres data of ${state.dataDir}, its jobs, keys and history:\n`);
  for (const p of state.paths) process.stderr.write(`  ${p}\n`);
  if (!yes && !(await confirm('Remove them? [y/N] '))) {
    process.stderr.write('jobgate: reset: not confirmed; nothing removed\n');
    return 1;
  }
  const removed = await removeEmbeddedData(config.dataDir, log);
  process.stdout.write(`removed ${removed.length} path${removed.length === 1 ? '' : 's'}; the next start begins afresh\n`);
  return 0;
}

/** `jobgate db url`: DATABASE_URL, or the running embedded server's jobgate database. */
async function dbUrlCommand(config: Config): Promise<number> {
  if (config.databaseUrl) {
    process.stdout.write(config.databaseUrl + '\n');
    return 0;
  }
  const { embeddedUrl } = await import('../db/embedded-files.js');
  process.stdout.write(embeddedUrl(config.dataDir) + '\n');
  return 0;
}

/** `jobgate keys create`: a key made on the database, printed once. */
async function keysCreate(options: Map<string, string | true>, config: Config, log: Logger, signals: Signals): Promise<number> {
  const text = (name: string) => {
    const value = options.get(name);
    return typeof value === 'string' ? value : undefined;
  };
  // Checked against its values by parseArgs.
  const role = text('--role') as 'ADMIN' | 'OPERATOR' | 'VIEWER';
  if (!config.databaseUrl) {
    // The embedded server is the running jobgate's: say what to do instead of "already running".
    const { embeddedState } = await import('../db/embedded-files.js');
    const { holder, dataDir } = embeddedState(config.dataDir);
    if (holder !== undefined) {
      process.stderr.write(
        `jobgate: keys create: jobgate (pid ${holder}) is running on the embedded Postgres in ${dataDir}; ` +
          "create the key there with the createApiKey mutation (an ADMIN key: GraphiQL, or the console's API keys), or stop jobgate first\n",
      );
      return 1;
    }
  }
  const source = await openDatabaseSource(config, log);
  const { createDatabase } = await import('../db/pool.js');
  const { sessions } = await import('../db/pooler.js');
  const { createJobService, DomainError } = await import('../service/index.js');
  return untilInterrupted(signals, log, 'keys', source, async () => {
    const { preparedStatements } = sessions({ connectionString: source.connectionString, ...(source.embedded ? {} : config) });
    const database = createDatabase({ connectionString: source.connectionString, max: 2, preparedStatements });
    try {
      await migrate(source.connectionString);
      const service = createJobService({ db: database.db, pool: database.pool, defaultMaxAttempts: config.defaultMaxAttempts });
      const created = await service.bootstrapKey(
        text('--workspace') ?? 'default',
        role,
        text('--name') ?? `created with jobgate keys create`,
        options.has('--installation-admin'),
      );
      const unprinted = await printOut(created.key + '\n');
      if (unprinted) {
        // Created and committed, but nobody saw it: say so (stderr may still be read) and fail.
        process.stderr.write(
          `jobgate: could not print the key (${(unprinted as NodeJS.ErrnoException).code ?? unprinted.message}); ` +
            `it exists unseen as key ${created.apiKey.id}: revoke it\n`,
        );
        return 1;
      }
      return 0;
    } catch (error) {
      if (error instanceof DomainError) {
        process.stderr.write(`jobgate: ${error.message}\n`);
        return 1;
      }
      throw error;
    } finally {
      await database.close();
    }
  });
}

/** `jobgate migrate`. */
async function migrateCommand(config: Config, log: Logger, signals: Signals): Promise<number> {
  const source = await openDatabaseSource(config, log);
  return untilInterrupted(signals, log, 'migrate', source, async () => {
    const { applied } = await migrate(source.connectionString, { log: (m) => log.debug(m) });
    log.info(describeApplied(applied));
    return 0;
  });
}

/** `jobgate start | serve | worker`: runs until a signal (or the embedded Postgres exiting) stops it. */
async function serve(command: 'start' | 'serve' | 'worker', config: Config, log: Logger, signals: Signals): Promise<number> {
  const { startApp } = await import('../app.js');
  let app: Awaited<ReturnType<typeof startApp>>;
  try {
    // Waits for a database that cannot be reached yet; a fault no wait cures rejects (exit 1).
    const roles = { gateway: command !== 'worker', worker: command !== 'serve' };
    app = await startApp({ config, log, roles, startupSignal: signals.starting.signal });
  } catch (error) {
    // Told to stop while it waited: a stop, not a failure. Only the wait's own answer to the
    // signal is; a real fault that happened to come after a signal still exits non-zero.
    const { requested, starting } = signals;
    // The embedded Postgres's initdb, stopped by the same Ctrl-C (sent to the process group), is the stop too.
    const interrupted = error instanceof EmbeddedPostgresInterrupted;
    if (requested && ((starting.signal.aborted && error === starting.signal.reason) || interrupted)) {
      log.info(`${command}: stopped while starting (${requested.why})`);
      return requested.code;
    }
    throw error;
  }
  return new Promise<number>((resolve) => {
    let stopping = false;
    signals.onStop = (why, code) => {
      if (stopping) return;
      stopping = true;
      log.info(`shutting down (${why})`);
      app.stop().then(
        () => resolve(code),
        (error: unknown) => {
          log.error(`shutdown failed: ${(error as Error).message}`);
          resolve(1);
        },
      );
    };
    let forced = false;
    signals.onForce = (why) => {
      if (!stopping || forced) return;
      forced = true;
      log.warn(`${why} again: stopping now, without waiting for what is in flight (its leases expire and it runs again elsewhere)`);
      app.stopNow().then(
        () => resolve(1),
        (error: unknown) => {
          log.error(`stopping now failed: ${(error as Error).message}`);
          resolve(1);
        },
      );
    };
    if (signals.requested) signals.onStop(signals.requested.why, signals.requested.code);
    void app.lost.then(() => signals.onStop('the embedded Postgres exited', 1));
  });
}

async function main(argv: string[]): Promise<number> {
  outliveClosedOutput();
  const parsed = parseArgs(argv);
  // Printed before the exit, not only queued: a pipe that is full (a reader slower than us) takes
  // the rest later, and process.exit would drop it (`jobgate schema | ...` lost its end).
  if (parsed.kind === 'help') {
    await printOut(parsed.text);
    return 0;
  }
  if (parsed.kind === 'version') {
    await printOut(`jobgate ${version()}\n`);
    return 0;
  }
  if (parsed.kind === 'usage-error') {
    process.stderr.write(parsed.message);
    return 2;
  }
  const { command, options } = parsed;
  if (command.name === 'schema') {
    const { printSdl, printSubgraphSdl } = await import('../schema/index.js');
    await printOut(options.has('--subgraph') ? printSubgraphSdl() : printSdl());
    return 0;
  }
  let config: Config;
  try {
    config = parseConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`jobgate: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  const log = createLogger(
    config.logLevel,
    undefined,
    config.logFormat ?? logFormatFor({ NODE_ENV: config.production ? 'production' : undefined }),
  );
  if (command.name === 'reset') return resetCommand(config, log, options.has('--yes'));
  if (command.name === 'db url') return dbUrlCommand(config);
  const signals = createSignals();
  if (command.name === 'keys create') return keysCreate(options, config, log, signals);
  if (command.name === 'migrate') return migrateCommand(config, log, signals);
  return serve(command.name as 'start' | 'serve' | 'worker', config, log, signals);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`jobgate: ${(error as Error).message}\n`);
    process.exit(1);
  },
);
