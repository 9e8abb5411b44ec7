/**
 * The CLI as it is installed: `npm pack` of the checkout's build, the tarball unpacked in a
 * folder of its own, and its `bin/jobgate.mjs` run with plain Node, no tsx.
 * What this proves: the compiled build runs, and it finds its migrations and its SDL relative to
 * the package root, not to `src/`.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmptyDatabase, createTestDb, type TestDb } from './support/db.js';
import { eventually } from './support/eventually.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
let tmp: string;
let pkg: string;
let t: TestDb;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  t = await createTestDb();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-installed-'));
  // The process group's setup has just made `dist/` fresh (test/support/global-build.ts), so the
  // pack runs no lifecycle script: its `prepack` would compile the same build again and its
  // `prepare` rebuild the console (half a minute together on a loaded machine). That `prepack`
  // builds is checked below.
  await run('npm', ['pack', '--ignore-scripts', '--pack-destination', tmp], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 });
  const tarballs = fs.readdirSync(tmp).filter((f) => f.endsWith('.tgz'));
  expect(tarballs).toHaveLength(1);
  const filename = tarballs[0]!;
  await run('tar', ['-xzf', path.join(tmp, filename), '-C', tmp]);
  pkg = path.join(tmp, 'package');
  // The unpacked package resolves its dependencies as an installed one would, from a
  // node_modules beside it (the checkout's, which has them).
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(pkg, 'node_modules'), 'dir');
}, 240_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await t?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const env = (extra: Record<string, string> = {}) => {
  const e: NodeJS.ProcessEnv = { ...process.env, JOBGATE_LOG_LEVEL: 'error', ...extra };
  delete e.NODE_OPTIONS; // vitest's loader hooks must not help the child
  return e;
};
const jobgate = (args: string[], extra: Record<string, string> = {}) =>
  run(process.execPath, [path.join(pkg, 'bin', 'jobgate.mjs'), ...args], { cwd: tmp, env: env(extra) });

describe('the installed jobgate command', () => {
  it('ships the compiled build, its migrations and its SDL, and needs no TypeScript runtime', () => {
    expect(fs.existsSync(path.join(pkg, 'dist', 'cli', 'main.js'))).toBe(true);
    expect(fs.existsSync(path.join(pkg, 'dist', 'index.d.ts'))).toBe(true);
    expect(fs.existsSync(path.join(pkg, 'src'))).toBe(false);
    const shipped = fs.readdirSync(path.join(pkg, 'migrations')).filter((f) => f.endsWith('.sql'));
    expect(shipped).toEqual(fs.readdirSync(path.join(ROOT, 'migrations')).filter((f) => f.endsWith('.sql')));
    const manifest = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(manifest.dependencies)).not.toContain('tsx');
  });

  it('compiles dist/ whenever it is packed or published (prepack)', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(manifest.scripts.prepack).toBe('npm run build');
    expect(manifest.scripts.build).toBe('tsc -p tsconfig.build.json');
  });

  it('--help, --version and schema run from dist with plain node', async () => {
    expect((await jobgate(['--help'])).stdout).toMatch(/^usage: jobgate <command>/);
    const { version } = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')) as { version: string };
    expect((await jobgate(['--version'])).stdout).toBe(`jobgate ${version}\n`);
    const { stdout } = await jobgate(['schema']);
    expect(stdout).toBe(fs.readFileSync(path.join(pkg, 'schema.graphql'), 'utf8'));
  });

  it('migrate applies every shipped migration to an empty database', async () => {
    const empty = await createEmptyDatabase();
    const client = new pg.Client({ connectionString: empty.url });
    try {
      await jobgate(['migrate'], { DATABASE_URL: empty.url });
      await client.connect();
      const { rows } = await client.query<{ name: string }>('select name from jobgate_migrations order by version');
      expect(rows.map((r) => r.name)).toEqual(
        fs
          .readdirSync(path.join(pkg, 'migrations'))
          .filter((f) => f.endsWith('.sql'))
          .sort(),
      );
    } finally {
      await client.end().catch(() => {});
      await empty.drop();
    }
  });

  it('start serves GraphQL, answers a key made by keys create, and stops cleanly on SIGTERM', async () => {
    const { stdout } = await jobgate(['keys', 'create', '--role', 'VIEWER'], { DATABASE_URL: t.url });
    const key = stdout.trim();
    const child = spawn(process.execPath, [path.join(pkg, 'bin', 'jobgate.mjs'), 'start'], {
      cwd: tmp,
      env: env({ DATABASE_URL: t.url, PORT: '0', JOBGATE_LOG_LEVEL: 'info', JOBGATE_LOG_FORMAT: 'pretty' }),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.add(child);
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    const url = await eventually(() => /GraphQL and GraphiQL at (\S+)/.exec(stderr)?.[1], {
      timeout: 60_000,
      what: `the gateway to serve:\n${stderr}`,
    });
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(await res.json()).toEqual({ data: { __typename: 'Query' } });
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    children.delete(child);
  });
});
