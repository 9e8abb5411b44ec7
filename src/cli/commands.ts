/**
 * What the `jobgate` command accepts: each command, its options, the environment variables it
 * reads, and the reading of argv against that table. Nothing here runs anything: a usage error is
 * found, named and answered (exit 2) before a database is touched, and `--help` answers without
 * running the command it describes.
 */

/** Environment variables by what they set (src/environment.ts parses them; docs/operating.md explains them). */
export const ENVIRONMENT_GROUPS = {
  database: ['DATABASE_URL', 'JOBGATE_DATA_DIR', 'JOBGATE_EMBEDDED_PORT'],
  // What a long-running process's connections read; `migrate` and the one-shot commands open one or two.
  connections: [
    'DATABASE_POOL_MAX',
    'DATABASE_POOL_WAIT_MS',
    'JOBGATE_DATABASE_POOLER',
    'JOBGATE_LISTEN_DATABASE_URL',
    'JOBGATE_PREPARED_STATEMENTS',
    'JOBGATE_READ_DATABASE_URL',
    'JOBGATE_READ_MAX_LAG_MS',
  ],
  logging: ['JOBGATE_LOG_LEVEL', 'JOBGATE_LOG_FORMAT', 'NODE_ENV'],
  service: [
    'JOBGATE_SECRET_KEY',
    'JOBGATE_DEFAULT_MAX_ATTEMPTS',
    'JOBGATE_OUTBOUND_ALLOW',
    'JOBGATE_DEMO_HANDLERS',
    'JOBGATE_MIGRATIONS',
    'JOBGATE_EVENT_RETENTION_HOURS',
    'JOBGATE_RETENTION_EXECUTIONS_DAYS',
    'JOBGATE_RETENTION_FAILED_DAYS',
    'JOBGATE_RETENTION_AUDIT_DAYS',
    'JOBGATE_RETENTION_RUNS_DAYS',
    'JOBGATE_RETENTION_KEEP_PER_JOB',
    'JOBGATE_RETENTION_ALERTS_DAYS',
    'JOBGATE_RETENTION_GONE_WORKERS_HOURS',
    'JOBGATE_RETENTION_RUN_DUE_BATCHES',
    'JOBGATE_RETENTION_BATCH',
    'JOBGATE_RETENTION_PAUSE_MS',
    'JOBGATE_RETENTION_EVERY_MINUTES',
    'JOBGATE_SMTP_URL',
    'JOBGATE_SMTP_FROM',
    'JOBGATE_ALERT_EMAIL_TO',
    'JOBGATE_PUBLIC_URL',
  ],
  process: [
    'HOST',
    'JOBGATE_METRICS_TOKEN',
    'JOBGATE_METRICS_PORT',
    'JOBGATE_METRICS_ENDPOINT_LABELS',
    'JOBGATE_SHUTDOWN_DELAY_MS',
    'JOBGATE_SHUTDOWN_GRACE_MS',
  ],
  gateway: [
    'PORT',
    'JOBGATE_INTROSPECTION',
    'JOBGATE_CORS_ORIGINS',
    'JOBGATE_PERSISTED_ONLY',
    'JOBGATE_PERSISTED_DOCUMENTS',
    'JOBGATE_MAX_BODY_BYTES',
    'JOBGATE_WS_KEEPALIVE_MS',
    'JOBGATE_RATE_LIMIT_PER_SECOND',
    'JOBGATE_RATE_LIMIT_BURST',
    'JOBGATE_MAX_REQUESTS_IN_FLIGHT_PER_KEY',
    'JOBGATE_MAX_CONNECTIONS_PER_KEY',
    'JOBGATE_MAX_SUBSCRIPTIONS_PER_KEY',
    'JOBGATE_MAX_SUBSCRIPTIONS_PER_CONNECTION',
    'JOBGATE_FAILED_AUTH_PER_MINUTE',
    'JOBGATE_MAX_CONNECTIONS_PER_ADDRESS',
    'JOBGATE_TRUSTED_PROXIES',
    'JOBGATE_CRON_SECRET',
  ],
  worker: [
    'JOBGATE_WORKER_CONCURRENCY',
    'JOBGATE_WORKER_BATCH_SIZE',
    'JOBGATE_CRON_LEAD_MS',
    'JOBGATE_LEASE_MS',
    'JOBGATE_HEARTBEAT_MS',
    'JOBGATE_DEFAULT_TIMEOUT_MS',
  ],
} as const;

type Group = keyof typeof ENVIRONMENT_GROUPS;

export interface OptionSpec {
  name: string;
  /** The values it takes (shown in help, checked); undefined: a flag. `string`: any text. */
  value?: 'string' | readonly string[];
  /** Missing is a usage error. */
  required?: boolean;
  help: string;
}

export interface CommandSpec {
  /** `keys create`, `db url`: the words that name it. */
  name: string;
  summary: string;
  /** Longer text under the usage line of `jobgate <command> --help`. */
  details?: string;
  options: readonly OptionSpec[];
  /** What it reads from the environment, by group. */
  env: readonly Group[];
  /** Variables read beyond the groups. */
  extraEnv?: readonly string[];
}

const SERVING_DETAILS = `On the embedded Postgres (in JOBGATE_DATA_DIR, default ./.jobgate) unless DATABASE_URL is set.
The first start on the embedded default creates an ADMIN key and saves it in <data dir>/admin-key.`;

export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'start',
    summary: 'the GraphQL gateway and a worker in one process',
    details: `${SERVING_DETAILS}
GraphiQL at http://127.0.0.1:4000/graphql (HOST, PORT). On the embedded default the demo
handlers (demo.echo, demo.flaky, demo.scan) are registered unless JOBGATE_DEMO_HANDLERS=off.`,
    options: [],
    env: ['database', 'connections', 'logging', 'service', 'process', 'gateway', 'worker'],
  },
  {
    name: 'serve',
    summary: 'the gateway only, for scaling out (N gateways, M workers, one Postgres)',
    details: SERVING_DETAILS,
    options: [],
    env: ['database', 'connections', 'logging', 'service', 'process', 'gateway'],
  },
  {
    name: 'worker',
    summary: 'a worker only',
    details: SERVING_DETAILS,
    options: [],
    env: ['database', 'connections', 'logging', 'service', 'process', 'worker'],
  },
  {
    name: 'migrate',
    summary: 'apply pending migrations and exit',
    options: [],
    env: ['database', 'logging'],
  },
  {
    name: 'schema',
    summary: 'print the GraphQL SDL',
    options: [{ name: '--subgraph', help: 'the federation subgraph SDL (with @link and @key), for a router to compose' }],
    env: [],
  },
  {
    name: 'keys create',
    summary: 'create an API key and print it (once)',
    details: `On the embedded default it starts the embedded Postgres itself, so it is refused while
jobgate runs there (stop it, or create keys with the createApiKey mutation).`,
    options: [
      { name: '--role', value: ['ADMIN', 'OPERATOR', 'VIEWER'], required: true, help: 'what the key may do' },
      { name: '--workspace', value: 'string', help: 'the workspace slug (default: default)' },
      { name: '--name', value: 'string', help: 'a name to recognise the key by' },
      { name: '--installation-admin', help: 'may create workspaces and revoke other installation-admin keys' },
    ],
    env: ['database', 'logging'],
    // Through a transaction pooler its statements go unnamed (src/db/pooler.ts).
    extraEnv: ['JOBGATE_DATABASE_POOLER', 'JOBGATE_PREPARED_STATEMENTS'],
  },
  {
    name: 'db url',
    summary: "print the connection string of the running embedded Postgres's jobgate database",
    details: `For library mode beside the embedded default: DATABASE_URL="$(npx jobgate db url)" node app.js.
Its port changes at every start unless JOBGATE_EMBEDDED_PORT pins it. With DATABASE_URL set,
prints DATABASE_URL.`,
    options: [],
    env: ['database'],
  },
  {
    name: 'reset',
    summary: 'remove the embedded Postgres data (the cluster wherever it lives, keys, log), after a confirmation',
    details: `Removes what the embedded default keeps for JOBGATE_DATA_DIR (default ./.jobgate): the cluster,
in the data folder or, for a root user whose postgres OS user cannot reach it, under /var/tmp;
the credentials, the secret key, the first ADMIN key and the log. Refused while jobgate runs on it.
Never touches a server named by DATABASE_URL. The next start begins afresh.`,
    options: [{ name: '--yes', help: 'do not ask for confirmation' }],
    env: ['database'],
  },
];

/** Every variable a command's help names. */
export function environmentOf(command: CommandSpec): string[] {
  return [...command.env.flatMap((g) => ENVIRONMENT_GROUPS[g]), ...(command.extraEnv ?? [])];
}

const optionUsage = (o: OptionSpec) => {
  const value = o.value === undefined ? '' : o.value === 'string' ? ` ${o.name.slice(2).toUpperCase()}` : ` ${o.value.join('|')}`;
  return o.required ? `${o.name}${value}` : `[${o.name}${value}]`;
};

export function usageLine(command: CommandSpec): string {
  return ['jobgate', command.name, ...command.options.map(optionUsage)].join(' ');
}

/** `jobgate --help`. */
export function generalHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  return `usage: jobgate <command> [options]

commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`).join('\n')}

  jobgate <command> --help   the command's options and the environment variables it reads
  jobgate --version          the version

Exit codes: 0 done, 1 failed, 2 usage error.
`;
}

/** `jobgate <command> --help`. */
export function commandHelp(command: CommandSpec): string {
  const lines = [`usage: ${usageLine(command)}`, '', command.summary + '.'];
  if (command.details) lines.push('', command.details);
  if (command.options.length) {
    lines.push('', 'options:');
    const width = Math.max(...command.options.map((o) => optionUsage(o).length)) + 2;
    for (const o of command.options) lines.push(`  ${optionUsage(o).padEnd(width)}${o.help}`);
  }
  const env = environmentOf(command);
  if (env.length) {
    lines.push('', 'environment:');
    for (const group of command.env) lines.push(...wrap(`  ${group}: `, ENVIRONMENT_GROUPS[group]));
    if (command.extraEnv?.length) lines.push(...wrap('  also: ', command.extraEnv));
  } else {
    lines.push('', 'environment: none read.');
  }
  return lines.join('\n') + '\n';
}

/** `words` after `lead`, in lines of at most 100 characters, continued under the first word. */
function wrap(lead: string, words: readonly string[]): string[] {
  const lines: string[] = [];
  let line = lead;
  for (const word of words) {
    if (line.length + word.length > 100 && line.trim().length > 0 && line !== lead) {
      lines.push(line.trimEnd());
      line = ' '.repeat(lead.length);
    }
    line += word + ' ';
  }
  lines.push(line.trimEnd());
  return lines;
}

export type Parsed =
  | { kind: 'help'; text: string }
  | { kind: 'version' }
  | { kind: 'usage-error'; message: string }
  | { kind: 'run'; command: CommandSpec; options: Map<string, string | true> };

const usageError = (message: string, hint: string): Parsed => ({ kind: 'usage-error', message: `jobgate: ${message}\n${hint}\n` });

/** Reads argv against the command table: what to answer or run. */
export function parseArgs(argv: readonly string[]): Parsed {
  const wantsHelp = argv.includes('--help') || argv.includes('-h');
  // No command is a usage error (exit 2), answered with the whole usage: what the commands are.
  if (argv.length === 0) return { kind: 'usage-error', message: generalHelp() };
  if (argv[0] === '--version' || argv[0] === '-v' || argv[0] === 'version') {
    if (argv.length > 1) return usageError(`${argv[0]} takes no argument, got "${argv[1]}"`, 'run `jobgate --help` for the commands');
    return { kind: 'version' };
  }
  const askedAbout = argv[0] === 'help' ? argv.slice(1).filter((a) => !a.startsWith('-')) : argv.filter((a) => !a.startsWith('-'));
  if (argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') {
    if (askedAbout.length === 0) return { kind: 'help', text: generalHelp() };
  }
  // The longest command name that the leading words spell: `keys create` before `keys`.
  const words = argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h' ? askedAbout : argv;
  const command = COMMANDS.find((c) => {
    const name = c.name.split(' ');
    return name.every((w, i) => words[i] === w);
  });
  if (!command) {
    const first = words[0]!;
    const family = COMMANDS.filter((c) => c.name.startsWith(`${first} `));
    if (family.length) {
      const subs = family.map((c) => c.name.split(' ')[1]).join(', ');
      if (wantsHelp || argv[0] === 'help') return { kind: 'help', text: family.map(commandHelp).join('\n') };
      return words[1] === undefined || words[1].startsWith('-')
        ? usageError(
            `${first}: missing subcommand (${subs})`,
            `run \`jobgate ${first} ${family[0]!.name.split(' ')[1]} --help\` for its usage`,
          )
        : usageError(`${first}: unknown subcommand "${words[1]}" (${subs})`, `run \`jobgate ${family[0]!.name} --help\` for its usage`);
    }
    if (first.startsWith('-')) return usageError(`unknown option ${first}`, 'run `jobgate --help` for the commands');
    return usageError(`unknown command "${first}"`, 'run `jobgate --help` for the commands');
  }
  if (wantsHelp || argv[0] === 'help') return { kind: 'help', text: commandHelp(command) };
  return readOptions(command, argv.slice(command.name.split(' ').length));
}

function readOptions(command: CommandSpec, args: readonly string[]): Parsed {
  const hint = `run \`jobgate ${command.name} --help\` for its usage`;
  const options = new Map<string, string | true>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const [name, inline] =
      arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const spec = command.options.find((o) => o.name === name);
    if (!spec) {
      return name.startsWith('-')
        ? usageError(`${command.name}: unknown option ${name}`, hint)
        : usageError(`${command.name} takes no argument "${arg}"`, hint);
    }
    if (spec.value === undefined) {
      if (inline !== undefined) return usageError(`${command.name}: ${name} takes no value`, hint);
      options.set(name, true);
      continue;
    }
    const value = inline ?? args[++i];
    if (value === undefined || (inline === undefined && value.startsWith('--'))) {
      return usageError(
        `${command.name}: ${name} needs a value${Array.isArray(spec.value) ? ` (${(spec.value as string[]).join(', ')})` : ''}`,
        hint,
      );
    }
    if (Array.isArray(spec.value) && !spec.value.includes(value)) {
      return usageError(`${command.name}: ${name} must be ${(spec.value as string[]).join(', ')}, not "${value}"`, hint);
    }
    options.set(name, value);
  }
  for (const o of command.options) {
    if (o.required && !options.has(o.name)) {
      const values = Array.isArray(o.value) ? ` (${(o.value as string[]).join(', ')})` : '';
      return usageError(`${command.name}: missing ${o.name}${values}`, hint);
    }
  }
  return { kind: 'run', command, options };
}
