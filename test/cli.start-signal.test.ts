/**
 * `npm start` stops when npm is sent SIGTERM, as a supervisor or `timeout npm start` sends it:
 * npm runs the script under a shell, and the shell's end used to leave jobgate running, holding
 * its port (scripts/build-if-stale.mjs).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDb, type TestDb } from './support/db.js';
import { eventually } from './support/engine.js';

const ROOT = path.resolve(import.meta.dirname, '..');
let t: TestDb;
let gatewayPid: number | undefined;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

beforeAll(async () => {
  t = await createTestDb();
});
afterAll(async () => {
  if (gatewayPid !== undefined && alive(gatewayPid)) process.kill(gatewayPid, 'SIGKILL');
  await t?.close();
});

it('stops jobgate when npm start is sent SIGTERM', async () => {
  const npm = spawn('npm', ['start'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: t.url, PORT: '0', JOBGATE_LOG_FORMAT: 'json' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  npm.stdout!.on('data', (d: Buffer) => (output += d.toString('utf8')));
  npm.stderr!.on('data', (d: Buffer) => (output += d.toString('utf8')));
  await eventually(async () => /GraphiQL at http/.test(output), 60_000, 'the gateway to listen');
  // The worker's id names the process it runs in: jobgate's own, below npm and its shell.
  gatewayPid = Number(/worker [^:\s]+:(\d+):/.exec(output)?.[1]);
  expect(gatewayPid).toBeGreaterThan(0);
  expect(gatewayPid).not.toBe(npm.pid);
  npm.kill('SIGTERM');
  await eventually(async () => !alive(gatewayPid!), 20_000, 'jobgate to exit after npm was sent SIGTERM');
  expect(output).toContain('shutting down (SIGTERM)');
}, 90_000);
