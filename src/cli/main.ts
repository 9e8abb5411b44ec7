/**
 * `jobgate <command>`: start | serve | worker | migrate | schema | keys create. Exit codes: 0 ok, 1 failure, 2 usage.
 */
import { parseConfig, ConfigError, type Config } from '../environment.js';
import { openDatabaseSource } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { createLogger, logFormatFor, type Logger } from '../log.js';
import { outliveClosedOutput, printOut } from './output.js';
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

type Command = 'start' | 'serve' | 'worker' | 'migrate' | 'keys';
const COMMANDS: readonly string[] = ['start', 'serve', 'worker', 'migrate', 'keys'];

/**
 * How the process answers SIGINT and SIGTERM, from the first moment: one that arrives during
 * start (initdb can take seconds) stops the process cleanly once start has settled, instead of
 * killing it half-way and leaving the embedded Postgres running behind it. What a stop does
 * changes as the command goes on (`onStop`); a stop asked for before that is remembered.
 */
function createSignals() {
  const signals = {
    requested: undefined as { why: string; code: number } | undefined,
    /** Ends a start-up that is waiting for its database to answer. */
    starting: new AbortController(),
    onStop: (why: string, code: number): void => {
      signals.requested ??= { why, code };
      signals.starting.abort(new Error(`interrupted (${why})`));
    },
  };
  process.once('SIGINT', () => signals.onStop('SIGINT', 0));
  process.once('SIGTERM', () => signals.onStop('SIGTERM', 0));
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

/** The usage answer to `argv` when it asks for no command to run (help, schema, a wrong command), else undefined. */
async function answerWithoutRunning(argv: string[]): Promise<number | undefined> {
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
  if (command === undefined || !COMMANDS.includes(command)) {
    process.stderr.write(USAGE);
    return command === undefined ? 0 : 2;
  }
  const unexpected = unexpectedArgument(argv);
  if (unexpected !== undefined) {
    process.stderr.write(`jobgate: ${command} does not take "${unexpected}"\n\n${USAGE}`);
    return 2;
  }
  return undefined;
}

/** `jobgate keys create`: a key made on the database, printed once. */
async function keysCreate(argv: string[], config: Config, log: Logger, signals: Signals): Promise<number> {
  const role = flag(argv, '--role');
  if (argv[1] !== 'create' || (role !== 'ADMIN' && role !== 'OPERATOR' && role !== 'VIEWER')) {
    process.stderr.write(USAGE);
    return 2;
  }
  const source = await openDatabaseSource(config, log);
  const { createDatabase } = await import('../db/pool.js');
  const { createJobService, DomainError } = await import('../service/index.js');
  return untilInterrupted(signals, log, 'keys', source, async () => {
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
    const { applied } = await migrate(source.connectionString, { log: (m) => log.info(m) });
    log.info(applied.length ? `migrations: applied ${applied.length}` : 'migrations: up to date');
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
    if (requested && starting.signal.aborted && error === starting.signal.reason) {
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
    if (signals.requested) signals.onStop(signals.requested.why, signals.requested.code);
    void app.lost.then(() => signals.onStop('the embedded Postgres exited', 1));
  });
}

async function main(argv: string[]): Promise<number> {
  outliveClosedOutput();
  const answered = await answerWithoutRunning(argv);
  if (answered !== undefined) return answered;
  const command = argv[0] as Command;
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
  const signals = createSignals();
  if (command === 'keys') return keysCreate(argv, config, log, signals);
  if (command === 'migrate') return migrateCommand(config, log, signals);
  return serve(command, config, log, signals);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`jobgate: ${(error as Error).message}\n`);
    process.exit(1);
  },
);
