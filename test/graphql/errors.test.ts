import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase } from '../../src/db/pool.js';
import { createLogger } from '../../src/log.js';
import { createGatewayYoga } from '../../src/server/gateway.js';
import { createJobService } from '../../src/service/index.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
});
afterAll(() => t.close());

const CREATE_JOB = `mutation ($input: CreateJobInput!) { createJob(input: $input) { created job { id kind status } } }`;

describe('errors over GraphQL', () => {
  it('reports a zod validation failure as VALIDATION_FAILED with the path of each bad field, relative to the input argument', async () => {
    const res = await g.gql(
      `mutation { registerEndpoint(input: { name: "Bad Name", kind: HTTP, url: "ftp://nope", maxAttempts: 0 }) { id } }`,
    );
    expect(res.data).toBeNull();
    const error = res.errors![0]!;
    expect(error.extensions!.code).toBe('VALIDATION_FAILED');
    const paths = error.extensions!.issues.map((i: { path: string[] }) => i.path.join('.')).sort();
    expect(paths).toEqual(['maxAttempts', 'name', 'url']);
    expect((await t.query("select count(*)::int as n from endpoints where type = 'USER'")).rows[0].n).toBe(0);
  });

  it('reports a payload-spec rejection with the path into the job input', async () => {
    const spec = await t.service.createPayloadSpec(t.actor, {
      name: 'gql.spec',
      jsonSchema: { type: 'object', required: ['to'], properties: { to: { type: 'string', format: 'email' } } },
    });
    await t.service.registerEndpoint(t.actor, { name: 'mail.send', kind: 'HANDLER', handlerName: 'mail', payloadSpecId: spec.id });
    const res = await g.gql(CREATE_JOB, { input: { endpointName: 'mail.send', kind: 'IMMEDIATE', input: { to: 'not-an-email' } } });
    expect(res.errors![0]!.extensions).toMatchObject({
      code: 'VALIDATION_FAILED',
      issues: [{ path: ['input', 'to'], message: 'must match format "email"' }],
    });
    expect(res.errors![0]!.path).toEqual(['createJob']);
  });

  it('names the cron field in an invalid expression and the timezone field for an unknown zone', async () => {
    await t.service.registerEndpoint(t.actor, { name: 'tick.tock', kind: 'HANDLER', handlerName: 'tick' });
    const bad = await g.gql(CREATE_JOB, { input: { endpointName: 'tick.tock', kind: 'CRON', cron: { expression: '*/5 * * 13 *' } } });
    expect(bad.errors![0]!.extensions!.code).toBe('VALIDATION_FAILED');
    expect(bad.errors![0]!.extensions!.issues[0].path).toEqual(['cron', 'expression']);
    expect(bad.errors![0]!.message).toMatch(/month field "13"/);
    const tz = await g.gql(CREATE_JOB, {
      input: { endpointName: 'tick.tock', kind: 'CRON', cron: { expression: '0 * * * *', timezone: 'Europe/Atlantis' } },
    });
    expect(tz.errors![0]!.extensions!.issues[0].path).toEqual(['cron', 'timezone']);
  });

  it('maps domain errors to their code: NOT_FOUND, CONFLICT, RETIRED', async () => {
    const nf = await g.gql(`{ job(id: "00000000-0000-0000-0000-000000000000") { id } }`);
    expect(nf.errors![0]!.extensions!.code).toBe('NOT_FOUND');
    expect(nf.errors![0]!.path).toEqual(['job']);

    const input = { endpointName: 'tick.tock', kind: 'IMMEDIATE', input: { a: 1 }, idempotencyKey: 'k1' };
    const first = await g.gql(CREATE_JOB, { input });
    expect(first.data.createJob.created).toBe(true);
    const again = await g.gql(CREATE_JOB, { input });
    expect(again.data.createJob).toEqual(first.data.createJob && { ...first.data.createJob, created: false });
    const conflict = await g.gql(CREATE_JOB, { input: { ...input, input: { a: 2 } } });
    expect(conflict.errors![0]!.extensions).toMatchObject({ code: 'CONFLICT', field: 'input' });

    const id = first.data.createJob.job.id;
    await g.gql(`mutation ($id: ID!) { cancelJob(id: $id) { cancelledExecutions } }`, { id });
    const retired = await g.gql(`mutation ($id: ID!) { cancelJob(id: $id) { cancelledExecutions } }`, { id });
    expect(retired.errors![0]!.extensions!.code).toBe('RETIRED');
  });

  it('masks unexpected errors: no message, no stack, a code, and the details in the server log', async () => {
    // Break the database under the service: the failure is not a domain error.
    await t.query('alter table workspaces rename to workspaces_gone');
    try {
      const res = await g.gql(`{ workspace { slug } }`);
      expect(res.errors![0]!.message).toBe('Unexpected error.');
      expect(res.errors![0]!.extensions).toEqual({ code: 'INTERNAL_SERVER_ERROR', requestId: expect.any(String) });
      expect(JSON.stringify(res)).not.toMatch(/workspaces|relation|at .*\.ts/);
      // Logged with the id the client was given, so its report can be matched to the line.
      const requestId = res.errors![0]!.extensions!.requestId as string;
      expect(g.logged.filter((l) => l.includes('relation "workspaces" does not exist'))).toEqual([
        expect.stringContaining(`requestId=${requestId}`),
      ]);
    } finally {
      await t.query('alter table workspaces_gone rename to workspaces');
    }
  });

  it('keeps the text of a refused operation, and any secret written inline in it, out of the server log', async () => {
    const secret = 'whsec_inline-literal-secret-0123456789';
    const viewer = { ...t.actor, role: 'VIEWER' as const };
    const refused = [
      await g.gql(
        `mutation { registerEndpoint(input: { name: "inline.hook", kind: HTTP, url: "https://example.com/h", signingSecret: "${secret}" }) { id } }`,
        undefined,
        viewer,
      ),
      await g.gql(
        `mutation { registerEndpoint(input: { name: "Bad Name", kind: HTTP, url: "https://example.com/h", signingSecret: "${secret}" }) { id } }`,
      ),
    ];
    expect(refused.map((r) => r.errors![0]!.extensions!.code)).toEqual(['FORBIDDEN', 'VALIDATION_FAILED']);
    expect(g.logged.join('\n')).not.toContain(secret);
  });

  it('answers UNAVAILABLE (503), not an internal error, while the database cannot be reached', async () => {
    // A port nothing listens on: every connection is refused.
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const down = createDatabase({ connectionString: `postgres://postgres@127.0.0.1:${port}/none`, connectionTimeoutMs: 1000 });
    const logged: string[] = [];
    const yoga = createGatewayYoga({
      service: createJobService({ db: down.db, pool: down.pool, defaultMaxAttempts: 5 }),
      log: createLogger('debug', (l) => logged.push(l)),
      authenticate: async () => t.actor,
    });
    try {
      const res = await yoga.fetch('http://test/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ workspace { slug } }' }),
      });
      expect(res.status).toBe(503);
      const body = (await res.json()) as { errors: { message: string; extensions: unknown }[] };
      expect(body.errors[0]!.extensions).toEqual({ code: 'UNAVAILABLE', requestId: expect.any(String) });
      expect(JSON.stringify(body)).not.toMatch(/ECONNREFUSED|at .*\.ts/);
      expect(logged.filter((l) => l.includes('database unreachable'))).toEqual([expect.stringMatching(/requestId=\S+$/)]);
      // Through an outage every request meets it: said once in 10 s, not once a request.
      for (let i = 0; i < 3; i++) {
        const again = await yoga.fetch('http://test/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: '{ workspace { slug } }' }),
        });
        expect(again.status).toBe(503);
      }
      expect(logged.filter((l) => l.includes('database unreachable'))).toHaveLength(1);

      // The database unreachable while the key is checked, before the operation runs: the same
      // answer, and the line carries the request's id too.
      const service = createJobService({ db: down.db, pool: down.pool, defaultMaxAttempts: 5 });
      const keyed = createGatewayYoga({
        service,
        log: createLogger('debug', (l) => logged.push(l)),
        authenticate: () => service.authenticate(`jg_${'k'.repeat(40)}`),
      });
      logged.length = 0;
      const refused = await keyed.fetch('http://test/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'req-db-down-1' },
        body: JSON.stringify({ query: '{ workspace { slug } }' }),
      });
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { errors: { extensions: unknown }[] }).errors[0]!.extensions).toEqual({
        code: 'UNAVAILABLE',
        requestId: 'req-db-down-1',
      });
      expect(logged.filter((l) => l.includes('database unreachable'))).toEqual([expect.stringContaining('requestId=req-db-down-1')]);
    } finally {
      await down.close();
    }
  });

  it('refuses text and JSON that Postgres cannot store (NUL, lone surrogates) as VALIDATION_FAILED naming the field, and writes nothing', async () => {
    const jobsBefore = (await t.query('select count(*)::int as n from jobs')).rows[0].n;
    const loggedBefore = g.logged.length;
    const base = { endpointName: 'tick.tock', kind: 'IMMEDIATE' };
    const cases: [Record<string, unknown>, (string | number)[]][] = [
      [{ ...base, name: 'a\u0000b' }, ['name']],
      [{ ...base, name: 'lone \ud800' }, ['name']],
      [{ ...base, idempotencyKey: 'k\u0000' }, ['idempotencyKey']],
      [{ ...base, idempotencyKey: 'k\udc00' }, ['idempotencyKey']],
      [{ ...base, lockKey: 'lock\u0000' }, ['lockKey']],
      [{ ...base, endpointName: 'tick.tock\u0000' }, ['endpointName']],
      [{ ...base, input: { note: 'x\u0000y' } }, ['input', 'note']],
      [{ ...base, input: { list: ['ok', 'lone \ud83d'] } }, ['input', 'list', 1]],
      [{ ...base, input: { 'key\u0000': 1 } }, ['input', 'key\u0000']],
    ];
    for (const [input, path] of cases) {
      const res = await g.gql(CREATE_JOB, { input });
      expect(res.errors?.[0]?.extensions, JSON.stringify(input)).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path }] });
    }
    const endpoint = await g.gql(`query ($name: String) { endpoint(name: $name) { id } }`, { name: 'tick\u0000' });
    expect(endpoint.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['name'] }] });
    expect((await t.query('select count(*)::int as n from jobs')).rows[0].n).toBe(jobsBefore);
    expect(g.logged.slice(loggedBefore).filter((l) => l.includes('unexpected error'))).toEqual([]);
  });

  it('refuses NUL in the other text arguments too (runs, audit log, handlers, keys, run params), and header values no request could carry, writing nothing', async () => {
    const keysBefore = (await t.query('select count(*)::int as n from api_keys')).rows[0].n;
    const endpointsBefore = (await t.query('select count(*)::int as n from endpoints')).rows[0].n;
    const loggedBefore = g.logged.length;
    const cases: [string, Record<string, unknown>, (string | number)[]][] = [
      ['query ($v: String) { runConnection(name: $v) { edges { node { id } } } }', { v: 'scan\u0000' }, ['name']],
      ['query ($v: String) { auditLog(action: $v) { nextCursor } }', { v: 'job.create\u0000' }, ['action']],
      ['query ($v: String) { auditLog(targetId: $v) { nextCursor } }', { v: 'x\u0000' }, ['targetId']],
      ['query ($v: String) { handlers(name: $v) { name } }', { v: 'noop\u0000' }, ['name']],
      [
        'mutation ($input: CreateApiKeyInput!) { createApiKey(input: $input) { key } }',
        { input: { name: 'ci\u0000', role: 'VIEWER' } },
        ['name'],
      ],
      [
        'mutation ($input: TriggerRunInput!) { triggerRun(input: $input) { outcome } }',
        { input: { name: 'scan', params: { path: '/a\u0000' } } },
        ['params', 'path'],
      ],
      [
        'mutation ($input: RegisterEndpointInput!) { registerEndpoint(input: $input) { id } }',
        { input: { name: 'headers.bad', kind: 'HTTP', url: 'https://example.com/x', headers: { 'x-note': 'a\r\nx-admin: yes' } } },
        ['headers', 'x-note'],
      ],
      [
        'mutation ($input: RegisterEndpointInput!) { registerEndpoint(input: $input) { id } }',
        { input: { name: 'headers.wide', kind: 'HTTP', url: 'https://example.com/x', headers: { 'x-note': '李雷' } } },
        ['headers', 'x-note'],
      ],
      // Framing headers the HTTP client sets itself: every attempt failed (some were retried) while
      // registration took them.
      ...['Transfer-Encoding', 'content-length', 'Expect', 'keep-alive', 'Upgrade'].map(
        (name): [string, Record<string, unknown>, string[]] => [
          'mutation ($input: RegisterEndpointInput!) { registerEndpoint(input: $input) { id } }',
          { input: { name: 'headers.framing', kind: 'HTTP', url: 'https://example.com/x', headers: { [name]: 'chunked' } } },
          ['headers', name],
        ],
      ),
    ];
    for (const [query, variables, path] of cases) {
      const res = await g.gql(query, variables);
      expect(res.errors?.[0]?.extensions, query).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path }] });
    }
    expect((await t.query('select count(*)::int as n from api_keys')).rows[0].n).toBe(keysBefore);
    expect((await t.query('select count(*)::int as n from endpoints')).rows[0].n).toBe(endpointsBefore);
    expect(g.logged.slice(loggedBefore).filter((l) => l.includes('unexpected error'))).toEqual([]);
  });

  it('refuses a bidirectional control in a name people read (a job, a key, a batch), writing nothing, and takes right-to-left text and its marks', async () => {
    const jobsBefore = (await t.query('select count(*)::int as n from jobs')).rows[0].n;
    const keysBefore = (await t.query('select count(*)::int as n from api_keys')).rows[0].n;
    for (const control of ['\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u2066', '\u2067', '\u2068', '\u2069']) {
      const job = await g.gql(CREATE_JOB, { input: { endpointName: 'tick.tock', kind: 'IMMEDIATE', name: `invoice${control}fdp.exe` } });
      expect(job.errors?.[0]?.extensions, control).toMatchObject({
        code: 'VALIDATION_FAILED',
        issues: [{ path: ['name'], message: expect.stringMatching(/bidirectional controls/) }],
      });
    }
    const key = await g.gql('mutation ($input: CreateApiKeyInput!) { createApiKey(input: $input) { key } }', {
      input: { name: 'ci\u202Eyeknimda', role: 'VIEWER' },
    });
    expect(key.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['name'] }] });
    const batch = await g.gql('mutation ($input: CreateBatchInput!) { createBatch(input: $input) { batch { id } } }', {
      input: { name: 'nightly\u2067', jobs: [{ endpointName: 'tick.tock', kind: 'IMMEDIATE' }] },
    });
    expect(batch.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect((await t.query('select count(*)::int as n from jobs')).rows[0].n).toBe(jobsBefore);
    expect((await t.query('select count(*)::int as n from api_keys')).rows[0].n).toBe(keysBefore);
    // Hebrew and Arabic need no control, and a left-to-right mark is a character of the text.
    await t.service.registerEndpoint(t.actor, { name: 'names.rtl', kind: 'HANDLER', handlerName: 'nobody' });
    const rtl = await g.gql(CREATE_JOB, {
      input: { endpointName: 'names.rtl', kind: 'DELAYED', runAt: '2099-01-01T00:00:00Z', name: 'חשבונית \u200E2026 فاتورة' },
    });
    expect(rtl.errors).toBeUndefined();
  });

  it('refuses JSON input nested too deep or holding a number JSON cannot carry, instead of failing or storing null', async () => {
    const jobsBefore = (await t.query('select count(*)::int as n from jobs')).rows[0].n;
    const raw = async (inputJson: string) => {
      const body = `{"query":${JSON.stringify(CREATE_JOB)},"variables":{"input":{"endpointName":"tick.tock","kind":"IMMEDIATE","input":${inputJson}}}}`;
      const res = await g.yoga.fetch('http://jobgate.test/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      return (await res.json()) as { errors?: { extensions?: Record<string, any> }[] };
    };
    const deep = await raw(`${'['.repeat(10_000)}1${']'.repeat(10_000)}`);
    expect(deep.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['input'] }] });
    // 1e400 parses to Infinity, which JSON.stringify would have written as null.
    const huge = await raw('{"amount": 1e400}');
    expect(huge.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['input', 'amount'] }] });
    expect((await t.query('select count(*)::int as n from jobs')).rows[0].n).toBe(jobsBefore);
  });

  it('refuses a DateTime that is not ISO-8601 before any resolver runs', async () => {
    const res = await g.gql(CREATE_JOB, { input: { endpointName: 'tick.tock', kind: 'DELAYED', runAt: 'tomorrow' } });
    expect(res.errors![0]!.message).toMatch(/RFC 3339/);
    expect(res.data).toBeUndefined();
  });

  it('refuses a DateTime without an offset, or naming a day or time that does not exist, and changes nothing', async () => {
    const jobsBefore = (await t.query('select count(*)::int as n from jobs')).rows[0].n;
    // new Date() read the first in the server's own time zone, and rolled the second forward to March 2.
    for (const runAt of [
      '2030-01-01T00:00:00',
      '2030-01-01T00:00',
      '2026-02-30T00:00:00Z',
      '2027-02-29T12:00:00Z',
      '2030-04-31T00:00:00Z',
      '2030-01-01T24:00:00Z',
      '2030-01-01T10:60:00Z',
      '2030-01-01T00:00:00+25:00',
      '0000-06-01T00:00:00Z',
      '2030-01-01',
      '2030-01-01 00:00:00Z',
      '+012030-01-01T00:00:00Z',
      // Within the years as written, past them once the offset is applied.
      '9999-12-31T23:59:59-23:59',
      '0001-01-01T00:00:00+00:01',
    ]) {
      const res = await g.gql(CREATE_JOB, { input: { endpointName: 'tick.tock', kind: 'DELAYED', runAt } });
      expect(res.errors?.[0]?.extensions?.code, runAt).toBe('VALIDATION_FAILED');
      expect(res.errors![0]!.message, runAt).toMatch(/is not an RFC 3339 date-time: it /);
    }
    const literal = await g.gql(
      `mutation { createJob(input: { endpointName: "tick.tock", kind: DELAYED, runAt: "2030-01-01T00:00:00" }) { created } }`,
    );
    expect(literal.errors![0]!.extensions!.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(literal.errors![0]!.message).toMatch(/a time zone offset/);
    expect((await t.query('select count(*)::int as n from jobs')).rows[0].n).toBe(jobsBefore);
  });

  it('refuses a date-time string without an offset from a library caller too, naming the field', async () => {
    const refused = t.service.createJob(t.actor, { endpointName: 'tick.tock', kind: 'DELAYED', runAt: '2030-01-01T00:00:00' as never });
    await expect(refused).rejects.toMatchObject({ code: 'VALIDATION_FAILED', details: { issues: [{ path: ['runAt'] }] } });
    await expect(refused).rejects.toThrow(/time zone offset/);
    const job = await t.service.createJob(t.actor, {
      endpointName: 'tick.tock',
      kind: 'DELAYED',
      runAt: '2030-01-01T09:00:00+09:00' as never,
    });
    expect(job.job.runAt?.toISOString()).toBe('2030-01-01T00:00:00.000Z');
  });

  it('previews a schedule from 1970 on, and up to the end of year 9999 only', async () => {
    const PREVIEW = `query ($from: DateTime) { cronPreview(expression: "* * * * *", timezone: "UTC", from: $from, count: 100) }`;
    // The walk's calendar arithmetic read year 0050 as 1950.
    const early = await g.gql(PREVIEW, { from: '0050-06-01T00:00:00Z' });
    expect(early.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['from'] }] });
    const late = await g.gql(PREVIEW, { from: '9999-12-31T23:00:00Z' });
    expect(late.errors).toBeUndefined();
    const shown = late.data.cronPreview as string[];
    expect(shown).toHaveLength(59);
    expect(shown.at(-1)).toBe('9999-12-31T23:59:00.000Z');
  });

  it("reads a DateTime's offset, fraction and leap day exactly", async () => {
    const runAt = async (value: string) => {
      const res = await g.gql(`mutation ($input: CreateJobInput!) { createJob(input: $input) { job { runAt } } }`, {
        input: { endpointName: 'tick.tock', kind: 'DELAYED', runAt: value },
      });
      expect(res.errors, value).toBeUndefined();
      return res.data.createJob.job.runAt as string;
    };
    expect(await runAt('2030-01-01T09:00:00+09:00')).toBe('2030-01-01T00:00:00.000Z');
    expect(await runAt('2029-12-31T19:30:00-04:30')).toBe('2030-01-01T00:00:00.000Z');
    expect(await runAt('2028-02-29T23:59:59.123456z')).toBe('2028-02-29T23:59:59.123Z');
    expect(await runAt('2400-02-29t00:00:00Z')).toBe('2400-02-29T00:00:00.000Z');
  });
});
