import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATION_LOCK_KEY } from '../src/db/migrate.js';
import { COMMANDS, environmentOf } from '../src/cli/commands.js';
import { ENVIRONMENT_VARIABLES } from '../src/environment.js';
import { printSdl, printSubgraphSdl } from '../src/schema/index.js';
import { createTestDb, type TestDb } from './support/db.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(() => t.close());

const cli = (args: string[], env: Record<string, string> = {}) =>
  run(process.execPath, [path.join(ROOT, 'bin', 'jobgate.mjs'), ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env, JOBGATE_LOG_LEVEL: 'error' },
  });

describe('the jobgate command', () => {
  it('keys create prints a new key with the asked role, once', async () => {
    const { stdout } = await cli(['keys', 'create', '--role', 'OPERATOR', '--name', 'from the cli'], { DATABASE_URL: t.url });
    const key = stdout.trim();
    expect(key).toMatch(/^jg_/);
    const actor = await t.service.authenticate(key);
    expect(actor).toMatchObject({ role: 'OPERATOR', workspaceId: t.actor.workspaceId });
    const { rows } = await t.query('select name from api_keys where id = $1', [actor.keyId]);
    expect(rows[0].name).toBe('from the cli');
  });

  it('refuses a bad role or an unknown workspace with a non-zero exit', async () => {
    await expect(cli(['keys', 'create', '--role', 'ROOT'], { DATABASE_URL: t.url })).rejects.toMatchObject({ code: 2 });
    await expect(cli(['keys', 'create', '--role', 'ADMIN', '--workspace', 'nope'], { DATABASE_URL: t.url })).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('Workspace "nope" not found'),
    });
  });

  it('schema prints the SDL', async () => {
    const { stdout } = await cli(['schema']);
    expect(stdout).toBe(printSdl());
    const subgraph = await cli(['schema', '--subgraph']);
    expect(subgraph.stdout).toBe(printSubgraphSdl());
    expect(subgraph.stdout).toContain('@key(fields: "id")');
  });

  it('--help prints the usage on stdout and exits 0, also after a command, without running it', async () => {
    // A server that is not there: a command that ran would fail to connect.
    const nowhere = { DATABASE_URL: 'postgres://127.0.0.1:1/nowhere' };
    for (const args of [['--help'], ['help'], ['-h']]) {
      const { stdout } = await cli(args, nowhere);
      expect(stdout, args.join(' ')).toMatch(/^usage: jobgate <command>/);
      expect(stdout).toContain('reset');
    }
    for (const [args, usage] of [
      [['migrate', '--help'], 'usage: jobgate migrate'],
      [['serve', '-h'], 'usage: jobgate serve'],
      [['keys', 'create', '--help'], 'usage: jobgate keys create --role ADMIN|OPERATOR|VIEWER'],
      [['help', 'keys', 'create'], 'usage: jobgate keys create'],
      [['keys', '--help'], 'usage: jobgate keys create'],
      [['help', 'reset'], 'usage: jobgate reset [--yes]'],
      [['db', 'url', '--help'], 'usage: jobgate db url'],
    ] as const) {
      const { stdout } = await cli([...args], nowhere);
      expect(stdout, args.join(' ')).toMatch(new RegExp(`^${usage.replace(/[|[\]]/g, '\\$&')}`));
    }
  });

  it('--help of a command names the environment variables it reads', async () => {
    const help = async (...args: string[]) => (await cli([...args, '--help'])).stdout;
    expect(await help('start')).toMatch(
      /environment:[\s\S]*DATABASE_URL[\s\S]*JOBGATE_DATA_DIR[\s\S]*PORT[\s\S]*JOBGATE_WORKER_CONCURRENCY/,
    );
    expect(await help('serve')).toContain('JOBGATE_CORS_ORIGINS');
    expect(await help('serve')).not.toContain('JOBGATE_WORKER_CONCURRENCY');
    expect(await help('worker')).toContain('JOBGATE_LEASE_MS');
    expect(await help('worker')).not.toContain('JOBGATE_CORS_ORIGINS');
    expect(await help('keys', 'create')).toMatch(/environment:[\s\S]*DATABASE_URL/);
    // Only what it reads: migrate opens one connection, with no pool, replica or listener settings.
    expect(await help('migrate')).toMatch(/environment:[\s\S]*DATABASE_URL[\s\S]*JOBGATE_LOG_LEVEL/);
    expect(await help('migrate')).not.toMatch(/DATABASE_POOL_MAX|JOBGATE_READ_DATABASE_URL|JOBGATE_LISTEN_DATABASE_URL/);
    expect(await help('schema')).toContain('environment: none read.');
  });

  it('every environment variable jobgate reads is named in the help of a command, and the help names no other', () => {
    const named = new Set(COMMANDS.flatMap(environmentOf));
    expect([...named].filter((v) => !ENVIRONMENT_VARIABLES.includes(v))).toEqual([]);
    expect(ENVIRONMENT_VARIABLES.filter((v) => !named.has(v))).toEqual([]);
  });

  it('--version prints the package version and exits 0', async () => {
    const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const args of [['--version'], ['-v'], ['version']]) {
      const { stdout, stderr } = await cli(args);
      expect(stdout, args.join(' ')).toBe(`jobgate ${version}\n`);
      expect(stderr).toBe('');
    }
  });

  it('no command prints the usage on stderr and exits 2', async () => {
    const failure = await cli([], { DATABASE_URL: 'postgres://127.0.0.1:1/nowhere' }).then(
      () => undefined,
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
    expect(failure?.code).toBe(2);
    expect(failure?.stdout).toBe('');
    expect(failure?.stderr).toMatch(/^usage: jobgate <command>/);
  });

  it('a usage error names what is wrong on stderr, in a line and a hint, and exits 2 without running anything', async () => {
    const nowhere = { DATABASE_URL: 'postgres://127.0.0.1:1/nowhere' };
    const cases: [string[], string][] = [
      [['bogus'], 'jobgate: unknown command "bogus"'],
      [['--bogus'], 'jobgate: unknown option --bogus'],
      [['migrate', 'now'], 'jobgate: migrate takes no argument "now"'],
      [['start', '--port', '5000'], 'jobgate: start: unknown option --port'],
      [['keys'], 'jobgate: keys: missing subcommand (create)'],
      [['keys', 'list'], 'jobgate: keys: unknown subcommand "list" (create)'],
      [['keys', 'create'], 'jobgate: keys create: missing --role (ADMIN, OPERATOR, VIEWER)'],
      [['keys', 'create', '--role'], 'jobgate: keys create: --role needs a value (ADMIN, OPERATOR, VIEWER)'],
      [['keys', 'create', '--role', 'ROOT'], 'jobgate: keys create: --role must be ADMIN, OPERATOR, VIEWER, not "ROOT"'],
      [['keys', 'create', '--role', 'ADMIN', '--workspace'], 'jobgate: keys create: --workspace needs a value'],
      [['reset', '--yes=1'], 'jobgate: reset: --yes takes no value'],
      [['--version', 'now'], 'jobgate: --version takes no argument, got "now"'],
    ];
    for (const [args, message] of cases) {
      const failure = await cli(args, nowhere).then(
        () => undefined,
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
      expect(failure, args.join(' ')).toBeDefined();
      expect(failure!.code, args.join(' ')).toBe(2);
      expect(failure!.stdout).toBe('');
      const lines = failure!.stderr.trimEnd().split('\n');
      expect(lines[0], args.join(' ')).toBe(message);
      expect(lines).toHaveLength(2);
      expect(lines[1]).toMatch(/^run `jobgate .*--help`/);
    }
  });

  it('a bad environment variable is a usage error naming it (exit 2)', async () => {
    await expect(cli(['migrate'], { PORT: 'eighty' })).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining('PORT: must be a whole number'),
    });
  });

  it('serve on a port another program holds says so and names PORT, exit 1', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as net.AddressInfo;
    try {
      await expect(cli(['serve'], { DATABASE_URL: t.url, HOST: '127.0.0.1', PORT: String(port) })).rejects.toMatchObject({
        code: 1,
        stderr: expect.stringContaining(
          `127.0.0.1:${port} is already in use (another jobgate, or another program, listens there): stop it, or set PORT`,
        ),
      });
    } finally {
      holder.close();
    }
  });

  it('db url prints DATABASE_URL when it is set', async () => {
    const { stdout } = await cli(['db', 'url'], { DATABASE_URL: t.url });
    expect(stdout).toBe(`${t.url}\n`);
  });

  it('a second signal while start waits (here for the migration lock) exits 1 at once; the first alone cannot end that wait', async () => {
    // A database with nothing applied, whose migration lock another session holds.
    const name = `jobgate_cli_lock_${process.pid}_${Date.now()}`;
    await t.query(`create database ${name}`);
    const url = new URL(t.url);
    url.pathname = `/${name}`;
    const holder = new pg.Client({ connectionString: url.toString() });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'jobgate.mjs'), 'serve'], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: url.toString(), PORT: '0', JOBGATE_LOG_LEVEL: 'info', JOBGATE_LOG_FORMAT: 'pretty' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
      const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
      // Waiting for the lock: a backend of the server blocked on it.
      const waiting = async () =>
        (
          await t.query(
            `select count(*)::int as n from pg_locks l join pg_database d on d.oid = l.database
             where l.locktype = 'advisory' and not l.granted and d.datname = $1`,
            [name],
          )
        ).rows[0].n > 0;
      for (let i = 0; i < 200 && !(await waiting()); i++) await new Promise((r) => setTimeout(r, 50));
      expect(await waiting(), stderr).toBe(true);
      child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 500));
      expect(child.exitCode, 'still waiting for the lock after the first signal').toBeNull();
      child.kill('SIGTERM');
      expect(await exited).toBe(1);
      expect(stderr).toContain('SIGTERM again: exiting now');
    } finally {
      await holder.end();
      await t.query(`drop database if exists ${name} with (force)`);
    }
  });
});
