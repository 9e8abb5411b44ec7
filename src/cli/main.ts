/**
 * `jobgate <command>`: start | serve | worker | migrate | schema | keys create. Exit codes: 0 ok, 1 failure, 2 usage.
 */
import { parseConfig, ConfigError } from '../config.js';
import { openDatabaseSource } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { createLogger, logFormatFor } from '../log.js';
import type { DatabaseSource } from '../db/connect.js';

const USAGE = `usage: jobgate <command>

commands:
  start     the GraphQL gateway and a worker in one process
            (on the embedded Postgres unless DATABASE_URL is set)
  serve     the gateway only, for scaling out (N gateways, M workers, one Postgres)
  worker    a worker only
  migrate   apply pending migrations and exit
  schema    print the GraphQL SDL
  keys create --role ADMIN|OPERATOR|VIEWER [--workspace SLUG] [--name NAME] [--installation-admin]
            create an API key and print it (once)
`;

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

const KEYS_OPTIONS_WITH_VALUE = new Set(['--role', '--workspace', '--name']);

/** The first argument `command` does not take, if any. */
function unexpectedArgument(argv: string[]): string | undefined {
  if (argv[0] !== 'keys') return argv[1];
  for (let i = 2; i < argv.length; i++) {
    if (KEYS_OPTIONS_WITH_VALUE.has(argv[i]!)) i++;
    else if (argv[i] !== '--installation-admin') return argv[i];
  }
  return undefined;
}

async function main(argv: string[]): Promise<number> {
  const command = argv[0];
  // Before anything runs: `jobgate serve --help` must not start a server (or migrate a database).
  if (command === 'help' || argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (command === 'schema') {
    const { printSdl } = await import('../schema/index.js');
    process.stdout.write(printSdl());
    return 0;
  }
  if (command !== 'start' && command !== 'serve' && command !== 'worker' && command !== 'migrate' && command !== 'keys') {
    process.stderr.write(USAGE);
    return command === undefined ? 0 : 2;
  }
  const unexpected = unexpectedArgument(argv);
  if (unexpected !== undefined) {
    process.stderr.write(`jobgate: ${command} does not take "${unexpected}"\n\n${USAGE}`);
    return 2;
  }
  let config;
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

  // Signals are handled from the first moment: one that arrives during start (initdb can take
  // seconds) stops the process cleanly once start has settled, instead of killing it half-way
  // and leaving the embedded Postgres running behind it.
  let stopRequested: { why: string; code: number } | undefined;
  // Ends a start-up that is waiting for its database to answer.
  const starting = new AbortController();
  let onStop: (why: string, code: number) => void = (why, code) => {
    stopRequested ??= { why, code };
    starting.abort(new Error(`interrupted (${why})`));
  };
  process.once('SIGINT', () => onStop('SIGINT', 0));
  process.once('SIGTERM', () => onStop('SIGTERM', 0));

  /** One-shot work on a database: a signal stops the source (the embedded server) and fails the command. */
  const untilInterrupted = async (source: DatabaseSource, work: () => Promise<number>): Promise<number> => {
    const interrupted = new Promise<string>((resolve) => {
      onStop = (why) => resolve(why);
      if (stopRequested) resolve(stopRequested.why);
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
  };

  if (command === 'keys') {
    const role = flag(argv, '--role');
    if (argv[1] !== 'create' || (role !== 'ADMIN' && role !== 'OPERATOR' && role !== 'VIEWER')) {
      process.stderr.write(USAGE);
      return 2;
    }
    const source = await openDatabaseSource(config, log);
    const { createDatabase } = await import('../db/pool.js');
    const { createJobService, DomainError } = await import('../service/index.js');
    return untilInterrupted(source, async () => {
      const database = createDatabase({ connectionString: source.connectionString, max: 2 });
      try {
        await migrate(source.connectionString);
        const service = createJobService({ db: database.db, pool: database.pool, defaultMaxAttempts: config.defaultMaxAttempts });
        const created = await service.bootstrapKey(
          flag(argv, '--workspace') ?? 'default',
          role,
          flag(argv, '--name') ?? `created with jobgate keys create`,
          argv.includes('--installation-admin'),
        );
        process.stdout.write(created.key + '\n');
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

  if (command === 'migrate') {
    const source = await openDatabaseSource(config, log);
    return untilInterrupted(source, async () => {
      const { applied } = await migrate(source.connectionString, { log: (m) => log.info(m) });
      log.info(applied.length ? `migrations: applied ${applied.length}` : 'migrations: up to date');
      return 0;
    });
  }

  const { startApp } = await import('../app.js');
  let app: Awaited<ReturnType<typeof startApp>>;
  try {
    // Waits for a database that cannot be reached yet; a fault no wait cures rejects (exit 1).
    app = await startApp(
      config,
      log,
      { gateway: command !== 'worker', worker: command !== 'serve' },
      undefined,
      undefined,
      undefined,
      starting.signal,
    );
  } catch (error) {
    // Told to stop while it waited: a stop, not a failure. Only the wait's own answer to the
    // signal is; a real fault that happened to come after a signal still exits non-zero.
    if (stopRequested && starting.signal.aborted && error === starting.signal.reason) {
      log.info(`${command}: stopped while starting (${stopRequested.why})`);
      return stopRequested.code;
    }
    throw error;
  }
  return new Promise<number>((resolve) => {
    let stopping = false;
    onStop = (why, code) => {
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
    if (stopRequested) onStop(stopRequested.why, stopRequested.code);
    void app.lost.then(() => onStop('the embedded Postgres exited', 1));
  });
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`jobgate: ${(error as Error).message}\n`);
    process.exit(1);
  },
);
