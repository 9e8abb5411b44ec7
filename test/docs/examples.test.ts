/**
 * The documentation's examples cannot go stale: its GraphQL documents validate against the
 * schema, its links lead somewhere, and the README's quick start runs as written against a real
 * gateway (startApp on a test database, with the demo handlers, over real HTTP and WebSocket):
 * once as GraphiQL documents, once as the `curl` lines in bash, each with the effect it promises.
 * The TypeScript snippets type-check against the built package, and library mode's whole program
 * runs in a child process on it. Which block is what: ./blocks.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  Kind,
  LoneAnonymousOperationRule,
  parse,
  UniqueOperationNamesRule,
  validate,
  type DocumentNode,
  type OperationDefinitionNode,
} from 'graphql';
import { createClient } from 'graphql-ws';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startApp, type RunningApp } from '../../src/app.js';
import { parseConfig } from '../../src/environment.js';
import { createLogger } from '../../src/log.js';
import { schema } from '../../src/schema/index.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { eventually } from '../support/eventually.js';
import { scrape } from '../support/prometheus.js';
import { allBlocks, anchorsOf, blocksOf, documentationFiles, linksOf, ROOT, type Block } from './blocks.js';

const QUICKSTART_URL = 'http://localhost:4000/graphql';
const METRICS_TOKEN = 'docs-test-metrics-token';

/**
 * A folder for snippets in the package's own folder, so `import 'jobgate'` is the package itself
 * (its exports: dist/, built for the process group), outside what tsconfig.json includes.
 */
function snippetFolder(): string {
  return fs.mkdtempSync(path.join(ROOT, '.doc-snippets-'));
}

/** The operations of a block, each as a document of its own (with the block's fragments). */
function operationsOf(block: Block): { name: string | undefined; document: DocumentNode; source: string }[] {
  const document = parse(block.code);
  const fragments = document.definitions.filter((d) => d.kind === Kind.FRAGMENT_DEFINITION);
  return document.definitions
    .filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION)
    .map((op) => ({
      name: op.name?.value,
      document: { kind: Kind.DOCUMENT, definitions: [op, ...fragments] },
      source: block.code.slice(op.loc!.start, op.loc!.end),
    }));
}

describe('the documentation', () => {
  it('has GraphQL blocks, and every operation in them validates against the schema', () => {
    const graphql = allBlocks().filter((b) => b.lang === 'graphql');
    expect(graphql.length).toBeGreaterThanOrEqual(8);
    for (const block of graphql) {
      // As a whole too, as GraphiQL and a POST take it: a block of several operations names each.
      expect(
        validate(schema, parse(block.code), [LoneAnonymousOperationRule, UniqueOperationNamesRule]).map((e) => e.message),
        `${block.file}:${block.line}`,
      ).toEqual([]);
      for (const op of operationsOf(block)) {
        const errors = validate(schema, op.document);
        expect(errors.map((e) => e.message), `${block.file}:${block.line} ${op.name ?? '(anonymous)'}`).toEqual([]);
      }
    }
  });

  it('has GraphQL in its code (`query: \'...\'`), and it validates against the schema', () => {
    const inCode = allBlocks()
      .filter((b) => ['ts', 'js'].includes(b.lang))
      .flatMap((b) => [...b.code.matchAll(/\bquery: '([^']+)'/g)].map((m) => ({ block: b, query: m[1]! })));
    expect(inCode.length).toBeGreaterThanOrEqual(1);
    for (const { block, query } of inCode) {
      expect(
        validate(schema, parse(query)).map((e) => e.message),
        `${block.file}:${block.line} ${query}`,
      ).toEqual([]);
    }
  });

  it("type-checks its TypeScript against the built package, each snippet's unknown names taken as `any`", () => {
    const snippets = allBlocks().filter((b) => b.lang === 'ts');
    expect(snippets.length).toBeGreaterThanOrEqual(8);
    const dir = snippetFolder();
    try {
      const files = snippets.map((block, i) => {
        // A fragment that uses `gate` without making one gets the library's type for it.
        const prelude = [
          'export {};',
          /\b(const|let) gate\b/.test(block.code) ? '' : "declare const gate: import('jobgate').Jobgate;",
          /\bz\./.test(block.code) && !/import \{ z \}/.test(block.code) ? "import { z } from 'zod';" : '',
        ];
        const file = path.join(dir, `snippet-${i}.ts`);
        return { block, file, prelude };
      });
      const unknown = new Map<string, Set<string>>();
      let diagnostics: readonly ts.Diagnostic[] = [];
      // Twice: the names the first pass finds undeclared (the application's `customers`, `pool`,
      // `db`...) are declared `any` for the second, which checks everything else.
      for (let pass = 0; pass < 2; pass++) {
        for (const { block, file, prelude } of files) {
          const declared = [...(unknown.get(file) ?? [])].map((name) => `declare const ${name}: any;`);
          fs.writeFileSync(file, [...prelude, ...declared, block.code].join('\n'));
        }
        const program = ts.createProgram(
          files.map((f) => f.file),
          {
            target: ts.ScriptTarget.ES2022,
            module: ts.ModuleKind.NodeNext,
            moduleResolution: ts.ModuleResolutionKind.NodeNext,
            lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
            types: ['node'],
            strict: true,
            noImplicitAny: false,
            skipLibCheck: true,
            noEmit: true,
          },
        );
        diagnostics = ts.getPreEmitDiagnostics(program).filter(
          // A module the docs import that jobgate does not install (hono): its names are `any`.
          (d) => d.code !== 2307 || !/'(hono|hono\/[\w-]+)'/.test(ts.flattenDiagnosticMessageText(d.messageText, ' ')),
        );
        if (pass === 0) {
          for (const d of diagnostics) {
            const name = /^Cannot find name '(\w+)'/.exec(ts.flattenDiagnosticMessageText(d.messageText, ' '))?.[1];
            if (name && d.file) unknown.set(path.resolve(d.file.fileName), (unknown.get(path.resolve(d.file.fileName)) ?? new Set()).add(name));
          }
        }
      }
      const where = (d: ts.Diagnostic) => {
        const snippet = files.find((f) => d.file && path.resolve(d.file.fileName) === f.file);
        return snippet ? `${snippet.block.file}:${snippet.block.line}` : (d.file?.fileName ?? '?');
      };
      expect(diagnostics.map((d) => `${where(d)}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`)).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('links only to files and headings that exist', () => {
    const broken: string[] = [];
    for (const file of documentationFiles()) {
      for (const { target, line } of linksOf(file)) {
        const [to, anchor] = target.split('#') as [string, string | undefined];
        const resolved = to === '' ? file : path.normalize(path.join(path.dirname(file), to));
        if (!fs.existsSync(path.join(ROOT, resolved))) broken.push(`${file}:${line} ${target} (no file ${resolved})`);
        else if (anchor && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor)) broken.push(`${file}:${line} ${target} (no heading)`);
      }
    }
    expect(broken).toEqual([]);
  });
});

describe("the README's quick start, on a real gateway", () => {
  let t: TestDb;
  let app: RunningApp;
  const children = new Set<ChildProcess>();
  const readme = blocksOf('README.md');

  beforeAll(async () => {
    t = await createTestDb();
    const config = parseConfig({
      DATABASE_URL: t.url,
      PORT: '0', JOBGATE_LOG_LEVEL: 'silent',
      JOBGATE_DEMO_HANDLERS: 'on',
      JOBGATE_METRICS_TOKEN: METRICS_TOKEN,
    });
    app = await startApp({ config, log: createLogger('silent') });
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await app?.stop();
    await t?.close();
  });

  it('has its GraphiQL documents and its shell lines', () => {
    expect(readme.filter((b) => b.lang === 'graphql' && b.tags.includes('quickstart')).length).toBeGreaterThanOrEqual(6);
    expect(readme.filter((b) => b.lang === 'sh' && b.tags.includes('quickstart')).length).toBeGreaterThanOrEqual(6);
    // The two commands, as they always were.
    expect(readme.some((b) => b.lang === 'sh' && b.code === 'npm install && npm start')).toBe(true);
    expect(readme.some((b) => b.lang === 'sh' && b.code === 'npm test')).toBe(true);
  });

  it('runs as GraphiQL documents, in order, each doing what the README says', async () => {
    // In a workspace of its own: the shell run below registers the same endpoints in another.
    const { key } = await t.service.bootstrapKey('other', 'ADMIN', 'quick start (GraphiQL)');
    const ops = new Map(
      readme
        .filter((b) => b.lang === 'graphql' && b.tags.includes('quickstart'))
        .flatMap(operationsOf)
        .map((op) => [op.name!, op.source]),
    );
    const ask = async (name: string, variables: Record<string, unknown> = {}) => {
      const query = ops.get(name);
      expect(query, `the quick start's ${name}`).toBeDefined();
      const res = await fetch(app.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ query, variables }),
      });
      const body = (await res.json()) as { data?: any; errors?: unknown };
      expect(body.errors, name).toBeUndefined();
      return body.data;
    };
    const client = createClient({
      url: app.url.replace('http', 'ws'),
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${key}` },
    });
    const subscribe = (name: string, variables: Record<string, unknown> = {}) => {
      const received: any[] = [];
      const done = new Promise<void>((resolve, reject) => {
        client.subscribe({ query: ops.get(name)!, variables }, { next: (m) => received.push(m.data), error: reject, complete: resolve });
      });
      return { received, done };
    };
    try {
      const endpoints = await ask('RegisterDemoEndpoints');
      expect([endpoints.echo.name, endpoints.flaky.name]).toEqual(['demo.echo', 'demo.flaky']);

      // Live from now on (no `after`): the jobs come once the gateway counts the subscription.
      const liveSubscriptions = async () => (await scrape(new URL(app.url).origin, METRICS_TOKEN)).value('jobgate_live_subscriptions');
      const before = await liveSubscriptions();
      const updates = subscribe('ExecutionUpdates');
      await eventually(async () => (await liveSubscriptions()) === before + 1, { what: 'the subscription to be live' });

      const echo = (await ask('EchoJob')).createJob;
      expect(echo).toMatchObject({ created: true, job: { state: 'ACTIVE' } });
      const flaky = (await ask('FlakyJob')).createJob.job;

      // The flaky job: two failed attempts, then a success, each change on the subscription.
      const executions = await eventually(
        async () => {
          const nodes = (await ask('Executions')).executions.nodes as any[];
          const byEndpoint = (name: string) => nodes.find((n) => n.job.endpoint.name === name);
          return byEndpoint('demo.echo')?.status === 'SUCCEEDED' && byEndpoint('demo.flaky')?.status === 'SUCCEEDED' && byEndpoint;
        },
        { timeout: 30_000, what: 'both quick-start executions to succeed' },
      );
      expect(executions('demo.flaky').attempts.map((a: any) => a.outcome)).toEqual(['FAILED', 'FAILED', 'SUCCEEDED']);
      expect(executions('demo.flaky').attempts[0].error).toContain('demo.flaky: attempt 1 fails on purpose');
      const flakyExecution = (await t.query(`select id from executions where job_id = $1`, [flaky.id])).rows[0].id;
      await eventually(() => updates.received.some((u) => u.executionUpdates.executionId === flakyExecution && u.executionUpdates.status === 'SUCCEEDED'), {
        what: "the flaky execution's success on the subscription",
      });
      const flakyStatuses = updates.received.filter((u) => u.executionUpdates.executionId === flakyExecution).map((u) => u.executionUpdates.status);
      expect(flakyStatuses).toEqual(['PENDING', 'RUNNING', 'PENDING', 'RUNNING', 'PENDING', 'RUNNING', 'SUCCEEDED']);

      const runAt = new Date(Date.now() + 60_000).toISOString();
      const delayed = (await ask('DelayedJob', { runAt })).createJob.job;
      expect(delayed.lastExecution).toEqual({ status: 'PENDING', scheduledFor: runAt });

      const preview = (await ask('CronPreview')).cronPreview as string[];
      expect(preview).toHaveLength(3);
      // 02:30 in New York: 07:30 UTC in winter, 06:30 in summer.
      for (const at of preview) expect(at).toMatch(/T0[67]:30:00\.000Z$/);
      const cron = (await ask('CronJob')).createJob.job.cron;
      expect(cron).toMatchObject({ expression: '*/5 * * * *', timezone: 'Europe/Paris' });
      expect(new Date(cron.nextFireAt).getUTCMinutes() % 5).toBe(0);
      expect(new Date(cron.nextFireAt).getTime()).toBeGreaterThan(Date.now());

      const scan = (await ask('ScanRun')).triggerRun;
      expect(scan).toMatchObject({ result: 'STARTED', run: { status: 'RUNNING' } });
      const progress = subscribe('RunProgress', { runId: scan.run.id });
      await progress.done;
      const last = progress.received.at(-1).runProgress;
      expect(last).toEqual({ status: 'COMPLETED', processed: 40, total: 40, progress: 1 });
      expect(progress.received.length).toBeGreaterThan(1);
      const runs = (await ask('Runs')).runConnection.nodes;
      expect(runs[0]).toMatchObject({ name: 'demo.scan', status: 'COMPLETED', findingCounts: [{ kind: 'demo.tenth', severity: 'INFO', count: 4 }] });
    } finally {
      await client.dispose();
    }
  });

  it('runs as the curl lines in bash, with the key where npm start saves it', async () => {
    const { key } = await t.service.bootstrapKey('default', 'ADMIN', 'quick start (curl)');
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'jobgate-quickstart-'));
    try {
      fs.mkdirSync(path.join(cwd, '.jobgate'));
      fs.writeFileSync(path.join(cwd, '.jobgate', 'admin-key'), `${key}\n`);
      const here = (code: string) => code.replaceAll(QUICKSTART_URL, app.url);
      const shell = readme.filter((b) => b.lang === 'sh' && b.tags.includes('quickstart'));
      const [setup, ...steps] = shell;
      expect(setup!.code).toContain('export KEY=$(cat .jobgate/admin-key)');
      const background = steps.filter((b) => b.tags.includes('background'));
      const foreground = steps.filter((b) => !b.tags.includes('background'));
      expect(background).toHaveLength(1);

      const bash = (script: string) => {
        const child = spawn('bash', ['-c', `set -euo pipefail\n${script}`], { cwd, env: { ...process.env, PATH: process.env.PATH } });
        children.add(child);
        let out = '';
        let err = '';
        child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
        child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
        const exited = new Promise<number | null>((resolve) =>
          child.on('close', (code) => {
            children.delete(child);
            resolve(code);
          }),
        );
        return { child, exited, out: () => out, err: () => err };
      };
      const stream = bash(here(`${setup!.code}\n${background[0]!.code}`));
      await eventually(() => stream.out().startsWith(':'), { what: 'the SSE stream to open' });

      const run = bash(here([setup!.code, ...foreground.map((b) => b.code)].join('\n')));
      expect(await run.exited, run.err()).toBe(0);
      // Every call answered data, no errors.
      const answers = run
        .out()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { data?: any; errors?: unknown });
      expect(answers.length).toBe(foreground.flatMap((b) => b.code.split('\n')).filter((l) => l.startsWith('gql ')).length);
      for (const answer of answers) expect(answer.errors, JSON.stringify(answer)).toBeUndefined();
      expect(run.out()).toContain('"name":"demo.echo"');
      expect(run.out()).toContain('"created":true');
      expect(run.out()).toMatch(/"cronPreview":\["[^"]+T0[67]:30:00.000Z"/);
      expect(run.out()).toContain('"result":"STARTED"');

      // The effects, in the default workspace.
      await eventually(
        async () => {
          const { rows } = await t.query(
            `select e.status, e.attempt_count, en.name from executions e join jobs j on j.id = e.job_id join endpoints en on en.id = j.endpoint_id
              where en.name in ('demo.echo', 'demo.flaky') and j.kind = 'IMMEDIATE' and en.workspace_id = $1 order by en.name`,
            [t.actor.workspaceId],
          );
          expect(rows).toEqual([
            { name: 'demo.echo', status: 'SUCCEEDED', attempt_count: 1 },
            { name: 'demo.flaky', status: 'SUCCEEDED', attempt_count: 3 },
          ]);
          return true;
        },
        { timeout: 30_000, what: 'the curl jobs to succeed' },
      );
      await eventually(() => stream.out().includes('"status":"SUCCEEDED"'), { what: 'a success on the SSE stream' });
      expect(stream.out()).toContain('event: next');
      await eventually(
        async () => (await t.service.runConnection(t.actor, { name: 'demo.scan' })).edges[0]?.node.status === 'COMPLETED',
        { timeout: 30_000, what: 'the curl scan to complete' },
      );
      stream.child.kill('SIGTERM');
      await stream.exited;
    } finally {
      fs.rmSync(cwd, { recursive: true, force: true });
    }
  });

  it("runs library mode's whole program on the built package", async () => {
    const [program] = allBlocks().filter((b) => b.lang === 'ts' && b.tags.includes('runnable'));
    expect(program, 'a runnable program in the docs').toBeDefined();
    const dir = snippetFolder();
    const file = path.join(dir, 'runnable.ts');
    fs.writeFileSync(file, program!.code);
    try {
      // Twice: "to run as it is" includes a second time, on the database the first run left.
      for (const run of [1, 2]) {
        const child = spawn(process.execPath, [path.join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs'), file], {
          cwd: ROOT,
          env: { ...process.env, DATABASE_URL: t.url },
        });
        children.add(child);
        let out = '';
        let err = '';
        child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
        child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
        const code = await new Promise<number | null>((resolve) =>
          child.on('close', (c) => {
            children.delete(child);
            resolve(c);
          }),
        );
        expect(code, `run ${run}: ${err}`).toBe(0);
        expect(out).toBe('hello, world (attempt 1)\n');
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
