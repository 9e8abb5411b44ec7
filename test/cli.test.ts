import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printSdl } from '../src/schema/index.js';
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
  });

  it('--help prints the usage on stdout and exits 0, also after a command, without running it', async () => {
    // A server that is not there: a command that ran would fail to connect.
    const nowhere = { DATABASE_URL: 'postgres://127.0.0.1:1/nowhere' };
    for (const args of [['--help'], ['help'], ['migrate', '--help'], ['serve', '-h'], ['keys', 'create', '--help']]) {
      const { stdout } = await cli(args, nowhere);
      expect(stdout, args.join(' ')).toMatch(/^usage: jobgate <command>/);
    }
  });

  it('refuses an unknown command or an argument a command does not take, with the usage and exit 2', async () => {
    const nowhere = { DATABASE_URL: 'postgres://127.0.0.1:1/nowhere' };
    for (const args of [['bogus'], ['migrate', 'now'], ['start', '--port', '5000']]) {
      await expect(cli(args, nowhere), args.join(' ')).rejects.toMatchObject({
        code: 2,
        stderr: expect.stringContaining('usage: jobgate <command>'),
      });
    }
  });
});
