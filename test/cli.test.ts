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
  run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { cwd: ROOT, env: { ...process.env, ...env, JOBGATE_LOG_LEVEL: 'error' } });

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
});
