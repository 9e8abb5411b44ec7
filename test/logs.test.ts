/**
 * Logs of a real `jobgate start` process: JSON lines, a request id on every line a GraphQL
 * request causes (kept from x-request-id when sane, else generated, and answered in the header
 * and in errors), execution, job and attempt ids on engine lines, and no secret anywhere after
 * failures that handle them: a secret config value, a signing secret and an API key.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/environment.js';
import { createLogger, logFormatFor, prettyLine } from '../src/log.js';
import { createTestDb, type TestDb } from './support/db.js';
import { eventually } from './support/engine.js';
import { startHttpTarget, type HttpTarget } from './support/http-target.js';

const ROOT = path.resolve(import.meta.dirname, '..');
let t: TestDb;
let target: HttpTarget;
let child: ChildProcess;
let output = '';
let url = '';
let key = '';
const configSecret = `cfg-${randomBytes(12).toString('hex')}`;
const signingSecret = `whsec_${randomBytes(24).toString('base64')}`;

beforeAll(async () => {
  t = await createTestDb();
  target = await startHttpTarget();
  ({ key } = await t.service.bootstrapKey('default', 'ADMIN', 'logs test'));
  child = spawn(process.execPath, [path.join(ROOT, 'bin', 'jobgate.mjs'), 'start'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: t.url,
      PORT: '0',
      JOBGATE_LOG_LEVEL: 'debug',
      JOBGATE_LOG_FORMAT: 'json',
      JOBGATE_SECRET_KEY: randomBytes(32).toString('hex'),
      JOBGATE_OUTBOUND_ALLOW: '127.0.0.0/8',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d: Buffer) => (output += d.toString('utf8')));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString('utf8')));
  url = await eventually(async () => /GraphiQL at (http:\/\/\S+?\/graphql)/.exec(output)?.[1], 60_000, 'the gateway to listen');
}, 90_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
  await target?.close();
  await t?.close();
});

async function gql(query: string, variables: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers },
    body: JSON.stringify({ query, variables }),
  });
  return { res, body: (await res.json()) as { data?: any; errors?: { extensions?: Record<string, unknown> }[] } };
}

const lines = () =>
  output
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('a real process', () => {
  it('answers every request with its id: kept when sane, generated otherwise', async () => {
    const kept = await gql('{ workspace { slug } }', {}, { 'x-request-id': 'req-abc.123' });
    expect(kept.res.headers.get('x-request-id')).toBe('req-abc.123');
    const insane = await gql('{ workspace { slug } }', {}, { 'x-request-id': 'no spaces <allowed>' });
    expect(insane.res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const long = await gql('{ workspace { slug } }', {}, { 'x-request-id': 'x'.repeat(129) });
    expect(long.res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const none = await gql('{ workspace { slug } }');
    expect(none.res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(none.res.headers.get('x-request-id')).not.toBe(long.res.headers.get('x-request-id'));
    // In errors too, a refused key's included.
    const refused = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer jg_not-a-key', 'x-request-id': 'req-401' },
      body: '{"query":"{ workspace { slug } }"}',
    });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('x-request-id')).toBe('req-401');
    expect(((await refused.json()) as { errors: { extensions: Record<string, unknown> }[] }).errors[0]!.extensions).toMatchObject({
      code: 'UNAUTHENTICATED',
      requestId: 'req-401',
    });
  });

  it('puts the request id in error extensions and on the log lines the request causes', async () => {
    const bad = await gql(
      `mutation { registerEndpoint(input: { name: "Not A Name", kind: HTTP, url: "http://127.0.0.1:1/x", signingSecret: "${signingSecret}" }) { id } }`,
      {},
      { 'x-request-id': 'req-bad-1' },
    );
    expect(bad.body.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', requestId: 'req-bad-1' });
    await eventually(async () => lines().some((l) => l.requestId === 'req-bad-1'), 10_000, 'a log line of the request');
    for (const l of lines().filter((x) => x.requestId === 'req-bad-1'))
      expect(l).toMatchObject({ level: expect.any(String), time: expect.any(String), msg: expect.any(String) });
  });

  it('fails deliveries that handle secrets, logs the attempts with their ids, and never a secret', async () => {
    target.route('/echo', (req, res) =>
      res.writeHead(500).end(`rejected: ${req.headers.authorization} ${req.headers['webhook-signature']}`),
    );
    const config = await gql(`mutation ($input: SetConfigInput!) { setConfig(input: $input) { id } }`, {
      input: { name: 'logs.settings', entries: [{ key: 'token', value: configSecret, secret: true }] },
    });
    expect(config.body.errors).toBeUndefined();
    const endpoint = await gql(`mutation ($input: RegisterEndpointInput!) { registerEndpoint(input: $input) { id } }`, {
      input: {
        name: 'logs.echo',
        kind: 'HTTP',
        url: `${target.url}/echo?t={{config.token}}`,
        configId: config.body.data.setConfig.id,
        headers: { Authorization: 'Bearer {{config.token}}' },
        signingSecret,
        maxAttempts: 2,
        backoffBaseMs: 10,
        backoffMaxMs: 20,
        jitter: false,
      },
    });
    expect(endpoint.body.errors).toBeUndefined();
    const job = await gql(`mutation { createJob(input: { endpointName: "logs.echo", kind: IMMEDIATE }) { job { id } } }`);
    const jobId = job.body.data.createJob.job.id as string;
    const ex = await eventually(
      async () => {
        const row = (await t.query(`select id, status from executions where job_id = $1`, [jobId])).rows[0];
        return row?.status === 'FAILED' ? row : undefined;
      },
      30_000,
      'the execution to fail',
    );
    expect(target.hitsOf('/echo')).toHaveLength(2);
    // The engine's lines about the attempts carry their ids.
    const attempts = await eventually(
      async () => {
        const found = lines().filter((l) => l.executionId === ex.id);
        return found.length >= 2 ? found : undefined;
      },
      10_000,
      'the attempt lines',
    );
    expect(attempts.map((l) => [l.jobId, l.attempt])).toEqual([
      [jobId, 1],
      [jobId, 2],
    ]);
    // A secret in no form: as set, nor the signing secret's key bytes, nor the API key.
    const secrets = [configSecret, signingSecret, signingSecret.slice('whsec_'.length), key, key.slice(3)];
    for (const s of secrets) expect(output).not.toContain(s);
    for (const s of secrets) expect(output.toLowerCase()).not.toContain(s.toLowerCase());
    expect(output).not.toContain(encodeURIComponent(signingSecret));
    expect(output).not.toContain(Buffer.from(configSecret).toString('base64'));
  });
});

describe('formats', () => {
  it('JSON unless a person watches a terminal outside production; the variable overrides', () => {
    expect(logFormatFor({}, false)).toBe('json');
    expect(logFormatFor({}, true)).toBe('pretty');
    expect(logFormatFor({ NODE_ENV: 'production' }, true)).toBe('json');
    expect(logFormatFor({ JOBGATE_LOG_FORMAT: 'pretty' }, false)).toBe('pretty');
    expect(logFormatFor({ JOBGATE_LOG_FORMAT: 'json' }, true)).toBe('json');
    expect(parseConfig({ JOBGATE_LOG_FORMAT: 'pretty' }).logFormat).toBe('pretty');
    expect(parseConfig({}).logFormat).toBeUndefined();
    expect(() => parseConfig({ JOBGATE_LOG_FORMAT: 'xml' })).toThrow(/JOBGATE_LOG_FORMAT: must be json or pretty/);
  });

  it('writes fields on JSON lines, and reads them out on pretty ones', () => {
    const json: string[] = [];
    createLogger('info', (l) => json.push(l), 'json').child!({ requestId: 'r-1' }).warn('slow "thing"', { ms: 12 });
    createLogger('info', (l) => json.push(l), 'json').debug('not at info');
    expect(json).toHaveLength(1);
    expect(JSON.parse(json[0]!)).toMatchObject({ level: 'warn', requestId: 'r-1', ms: 12, msg: 'slow "thing"', time: expect.any(String) });
    expect(prettyLine(json[0]!)).toMatch(/^\S+Z warn {2}slow "thing" requestId=r-1 ms=12$/);
  });

  it("a child's child carries both sets of fields, the later winning, on every line it writes", () => {
    const json: string[] = [];
    const request = createLogger('info', (l) => json.push(l), 'json').child!({ requestId: 'r-2', step: 'outer' });
    const attempt = request.child!({ executionId: 'e-1', step: 'inner' });
    attempt.debug('below the level');
    attempt.info('first');
    attempt.error('second', { ms: 3 });
    request.info('outer');
    expect(json.map((l) => JSON.parse(l) as Record<string, unknown>)).toMatchObject([
      { msg: 'first', requestId: 'r-2', executionId: 'e-1', step: 'inner' },
      { msg: 'second', requestId: 'r-2', executionId: 'e-1', step: 'inner', ms: 3, level: 'error' },
      { msg: 'outer', requestId: 'r-2', step: 'outer' },
    ]);
    expect(JSON.parse(json[2]!)).not.toHaveProperty('executionId');
  });
});
