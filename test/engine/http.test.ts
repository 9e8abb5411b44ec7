import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRetryAfter } from '../../src/service/engine/delivery/deliver.js';
import { barredEndpoints } from '../../src/service/endpoints/config-secrets.js';
import { render, TemplateError } from '../../src/service/endpoints/template.js';
import { createTestDb, TEST_SECRETS, type TestDb } from '../support/db.js';
import { attemptsOf, engineHarness, settled, type EngineHarness } from '../support/engine.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';

let t: TestDb;
let h: EngineHarness;
let target: HttpTarget;
const secret = `whsec_${randomBytes(24).toString('base64')}`;

async function endpoint(name: string, path: string, extra: Record<string, unknown> = {}) {
  return t.service.registerEndpoint(t.actor, {
    name,
    kind: 'HTTP',
    url: `${target.url}${path}`,
    backoffBaseMs: 50,
    backoffMaxMs: 1000,
    jitter: false,
    maxAttempts: 3,
    ...extra,
  });
}

beforeAll(async () => {
  t = await createTestDb();
  target = await startHttpTarget();
  h = engineHarness(t);
  // These tests deliver to a loopback server: allow loopback explicitly, as an operator would.
  await h.worker({ outboundAllow: ['127.0.0.0/8'], defaultTimeoutMs: 5000 });
});
afterAll(async () => {
  await h.stopAll();
  await target.close();
  await t.close();
});

describe('HTTP executions', () => {
  it('POSTs the rendered request, signed per Standard Webhooks, and records the response', async () => {
    const config = await t.service.setConfig(t.actor, {
      name: 'crm.settings',
      entries: [
        { key: 'tenant', value: 'acme' },
        { key: 'token', value: 'sk-very-secret', secret: true },
      ],
    });
    await endpoint('crm.sync', '/ok/{{config.tenant}}/{{input.customer.id}}', {
      configId: config.id,
      headers: { Authorization: 'Bearer {{config.token}}', 'X-Customer': '{{input.customer.name}}' },
      signingSecret: secret,
    });
    target.route('/ok/acme/c%2F7', (_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks, got it'));
    const { job } = await t.service.createJob(t.actor, {
      endpointName: 'crm.sync',
      kind: 'IMMEDIATE',
      input: { customer: { id: 'c/7', name: 'Ada' }, note: 'for {{config.tenant}}' },
    });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('SUCCEEDED');
    const [hit] = target.hitsOf('/ok/acme/c%2F7');
    expect(hit!.method).toBe('POST');
    expect(hit!.headers.authorization).toBe('Bearer sk-very-secret');
    expect(hit!.headers['x-customer']).toBe('Ada');
    expect(hit!.headers['content-type']).toBe('application/json');
    expect(JSON.parse(hit!.body)).toEqual({ customer: { id: 'c/7', name: 'Ada' }, note: 'for acme' });
    // An independent verifier accepts the signature.
    const verified = new Webhook(secret).verify(hit!.body, hit!.headers as Record<string, string>);
    expect(verified).toEqual(JSON.parse(hit!.body));
    expect(hit!.headers['webhook-id']).toBe(ex.id);
    expect(() =>
      new Webhook(`whsec_${randomBytes(24).toString('base64')}`).verify(hit!.body, hit!.headers as Record<string, string>),
    ).toThrow();
    const [attempt] = await attemptsOf(t, ex.id);
    expect(attempt).toMatchObject({ outcome: 'SUCCEEDED', status_code: 200, response_excerpt: 'thanks, got it' });
  });

  it("renders into a job's input only the secrets its key may name, when the request is built: a secret set after the job was written is refused", async () => {
    const config = await t.service.setConfig(t.actor, { name: 'late.cfg', entries: [{ key: 'token', value: 'public-value' }] });
    await endpoint('late.secret', '/late', { configId: config.id, maxAttempts: 1 });
    target.route('/late', (_req, res) => res.writeHead(200).end('ok'));
    const { key } = await t.service.createApiKey(t.actor, { name: 'late operator', role: 'OPERATOR' });
    const operator = await t.service.authenticate(key);
    // Named while the value was not secret: the job is accepted.
    const later = () => ({
      endpointName: 'late.secret',
      kind: 'DELAYED' as const,
      runAt: new Date(Date.now() + 1500),
      input: { s: '{{config.token}}' },
    });
    const { job: operators } = await t.service.createJob(operator, later());
    const { job: admins } = await t.service.createJob(t.actor, later());
    // Then the ADMIN makes it a secret, for its own endpoint.
    await t.service.setConfig(t.actor, { name: 'late.cfg', entries: [{ key: 'token', value: 'late-s3cret-value', secret: true }] });
    const refused = await settled(t, operators.id);
    expect(refused.status).toBe('FAILED');
    expect(refused.last_error).toMatch(/^cannot build the request: \{\{config\.token\}\}: a secret that the job's input may not name/);
    const sent = await settled(t, admins.id);
    expect(sent.status).toBe('SUCCEEDED');
    const hits = target.hitsOf('/late');
    expect(hits.map((hit) => JSON.parse(hit.body))).toEqual([{ s: 'late-s3cret-value' }]);
  });

  it("sends a config's secret in an endpoint's url and headers only when the key that aimed it may: an ADMIN's update approves it", async () => {
    const keyed = async (role: 'ADMIN' | 'OPERATOR') =>
      t.service.authenticate((await t.service.createApiKey(t.actor, { name: `aim ${role}`, role })).key);
    const [admin, operator] = [await keyed('ADMIN'), await keyed('OPERATOR')];
    const config = await t.service.setConfig(operator, { name: 'aimed.cfg', entries: [{ key: 'token', value: 'operator-value' }] });
    await t.service.registerEndpoint(operator, {
      name: 'aimed.hook',
      kind: 'HTTP',
      url: `${target.url}/aimed`,
      headers: { 'x-token': '{{config.token}}' },
      configId: config.id,
      maxAttempts: 1,
    });
    target.route('/aimed', (_req, res) => res.writeHead(200).end('ok'));
    // An ADMIN's secret in it, as a release before the rule let it be written (now refused: CONFLICT).
    await expect(
      t.service.setConfig(admin, { name: 'aimed.cfg', entries: [{ key: 'token', value: 'admin-s3cret-value', secret: true }] }),
    ).rejects.toMatchObject({ code: 'CONFLICT' });
    await t.query(`update configs set entries = $2 where id = $1`, [
      config.id,
      JSON.stringify({ token: { value: TEST_SECRETS.seal('admin-s3cret-value'), secret: true, setBy: admin.keyId } }),
    ]);
    const run = async () => settled(t, (await t.service.createJob(admin, { endpointName: 'aimed.hook', kind: 'IMMEDIATE' })).job.id);
    const refused = await run();
    expect(refused.status).toBe('FAILED');
    expect(refused.last_error).toMatch(/^cannot build the request: \{\{config\.token\}\}: a secret this endpoint may not send/);
    expect(target.hitsOf('/aimed')).toHaveLength(0);
    // What a start warns of.
    expect(await barredEndpoints(t.db, 10)).toContain('default/aimed.hook');
    // The ADMIN looks at where it sends and keeps it: now its own choice.
    await t.service.updateEndpoint(admin, { id: (await t.service.endpoint(admin, { name: 'aimed.hook' })).id, url: `${target.url}/aimed` });
    expect((await run()).status).toBe('SUCCEEDED');
    expect(target.hitsOf('/aimed').map((hit) => hit.headers['x-token'])).toEqual(['admin-s3cret-value']);
    expect(await barredEndpoints(t.db, 10)).not.toContain('default/aimed.hook');
  });

  it('signs with a plain (non-whsec_) secret so that the reference verifier accepts it in its whsec_ form, or raw', async () => {
    const plain = 'a plain secret of mine, 40 characters!!';
    await endpoint('plain.signed', '/plain', { signingSecret: plain });
    target.route('/plain', (_req, res) => res.writeHead(204).end());
    const { job } = await t.service.createJob(t.actor, { endpointName: 'plain.signed', kind: 'IMMEDIATE', input: { n: 1 } });
    expect((await settled(t, job.id)).status).toBe('SUCCEEDED');
    const [hit] = target.hitsOf('/plain');
    const headers = hit!.headers as Record<string, string>;
    // What docs/api-by-task.md tells a receiver to do with a plain secret.
    expect(new Webhook(`whsec_${Buffer.from(plain, 'utf8').toString('base64')}`).verify(hit!.body, headers)).toEqual({ n: 1 });
    expect(new Webhook(plain, { format: 'raw' }).verify(hit!.body, headers)).toEqual({ n: 1 });
  });

  it('retries 5xx responses with backoff, then succeeds', async () => {
    await endpoint('flaky.api', '/flaky');
    target.route('/flaky', (_req, res, n) => (n < 3 ? res.writeHead(503).end('busy') : res.writeHead(204).end()));
    const { job } = await t.service.createJob(t.actor, { endpointName: 'flaky.api', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('SUCCEEDED');
    const attempts = await attemptsOf(t, ex.id);
    expect(attempts.map((a) => [a.outcome, a.status_code])).toEqual([
      ['FAILED', 503],
      ['FAILED', 503],
      ['SUCCEEDED', 204],
    ]);
  });

  it('honours Retry-After on 429', async () => {
    await endpoint('limited.api', '/limited');
    target.route('/limited', (_req, res, n) => (n === 1 ? res.writeHead(429, { 'retry-after': '1' }).end() : res.writeHead(200).end('ok')));
    const { job } = await t.service.createJob(t.actor, { endpointName: 'limited.api', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    const attempts = await attemptsOf(t, ex.id);
    expect(attempts.map((a) => a.status_code)).toEqual([429, 200]);
    // Retry-After: 1 s, not the endpoint's 50 ms backoff.
    expect(attempts[1].started_at.getTime() - attempts[0].finished_at.getTime()).toBeGreaterThanOrEqual(1000);
  });

  it('fails a 4xx at once, without retries', async () => {
    await endpoint('strict.api', '/strict');
    target.route('/strict', (_req, res) => res.writeHead(422).end('{"error":"bad customer"}'));
    const { job } = await t.service.createJob(t.actor, { endpointName: 'strict.api', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex).toMatchObject({ status: 'FAILED', attempt_count: 1, last_error: 'HTTP 422' });
    expect((await attemptsOf(t, ex.id))[0].response_excerpt).toBe('{"error":"bad customer"}');
  });

  it('does not follow redirects', async () => {
    await endpoint('moved.api', '/moved');
    target.route('/moved', (_req, res) => res.writeHead(302, { location: `${target.url}/elsewhere` }).end());
    target.route('/elsewhere', (_req, res) => res.writeHead(200).end());
    const { job } = await t.service.createJob(t.actor, { endpointName: 'moved.api', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('FAILED');
    expect(ex.last_error).toMatch(/redirect \(302 to .*\/elsewhere\) not followed/);
    expect(target.hitsOf('/elsewhere')).toHaveLength(0);
  });

  it('aborts an attempt at the endpoint timeout and retries it', async () => {
    await endpoint('slow.api', '/slow', { timeoutMs: 200, maxAttempts: 2 });
    target.route('/slow', () => {
      /* never answers */
    });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'slow.api', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('FAILED');
    const attempts = await attemptsOf(t, ex.id);
    expect(attempts.map((a) => a.outcome)).toEqual(['TIMED_OUT', 'TIMED_OUT']);
    expect(attempts[0].error).toBe('timed out after 200 ms');
    // The request was really aborted, not left hanging.
    expect(target.abandoned.filter((p) => p === '/slow')).toHaveLength(2);
  });

  it('reads the response body only up to the cap, then drops the connection', async () => {
    await endpoint('big.api', '/big');
    target.route('/big', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = 'x'.repeat(64 * 1024);
      let sent = 0;
      const pump = () => {
        while (sent < 50 * 1024 * 1024) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    const { job } = await t.service.createJob(t.actor, { endpointName: 'big.api', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('SUCCEEDED');
    const [attempt] = await attemptsOf(t, ex.id);
    expect(attempt.response_excerpt).toHaveLength(4096);
    expect(target.abandoned).toContain('/big');
  });

  it('keeps secret config values out of recorded errors and excerpts', async () => {
    const config = await t.service.setConfig(t.actor, {
      name: 'leaky.settings',
      entries: [{ key: 'token', value: 'tok-abcdef-123', secret: true }],
    });
    await endpoint('leaky.api', '/leaky', { configId: config.id, headers: { 'x-token': '{{config.token}}' } });
    target.route('/leaky', (req, res) => res.writeHead(400).end(`you sent ${req.headers['x-token']}`));
    const { job } = await t.service.createJob(t.actor, { endpointName: 'leaky.api', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    const [attempt] = await attemptsOf(t, ex.id);
    expect(attempt.response_excerpt).toBe('you sent [redacted]');
    expect(JSON.stringify(await attemptsOf(t, ex.id))).not.toContain('tok-abcdef-123');
    expect(h.logs.join('\n')).not.toContain('tok-abcdef-123');
  });

  it('keeps a secret out of the recorded error when a redirect echoes it in its location', async () => {
    const config = await t.service.setConfig(t.actor, {
      name: 'moved.settings',
      entries: [{ key: 'key', value: 'key-4f2c9a77', secret: true }],
    });
    // A trailing-slash redirect that keeps the query string: an everyday server habit.
    await endpoint('moved.keyed', '/keyed?key={{config.key}}', { configId: config.id });
    target.route('/keyed', (req, res) =>
      res.writeHead(301, { location: `${target.url}/keyed/${new URL(req.url!, 'http://x').search}` }).end(),
    );
    // The same, with the key where the error's 200-character cut of the location falls: the cut
    // comes after redaction and moves past the key, so it is replaced whole.
    await endpoint('moved.long', '/long?key={{config.key}}', { configId: config.id });
    target.route('/long', (req, res) => {
      const start = `${target.url}/long/?pad=`;
      res
        .writeHead(301, {
          location: `${start}${'p'.repeat(196 - start.length - 5)}&key=${new URL(req.url!, 'http://x').searchParams.get('key')}`,
        })
        .end();
    });
    for (const [name, pattern] of [
      ['moved.keyed', /redirect \(301 to .*\/keyed\/\?key=\[redacted\]\) not followed/],
      ['moved.long', /redirect \(301 to .*&key=\[redacted\]\) not followed/],
    ] as const) {
      const { job } = await t.service.createJob(t.actor, { endpointName: name, kind: 'IMMEDIATE' });
      const ex = await settled(t, job.id);
      expect(ex.status).toBe('FAILED');
      expect(ex.last_error).toMatch(pattern);
      expect(JSON.stringify(await attemptsOf(t, ex.id))).not.toContain('key-');
    }
  });

  it('keeps the start of a secret out of an excerpt that the cap cuts through it', async () => {
    const config = await t.service.setConfig(t.actor, {
      name: 'cut.settings',
      entries: [{ key: 'token', value: 'cut-secret-0123456789', secret: true }],
    });
    await endpoint('cut.api', '/cut', { configId: config.id, headers: { 'x-token': '{{config.token}}' } });
    // The secret starts 8 bytes before the 4 KiB cap.
    target.route('/cut', (req, res) => res.writeHead(200).end(`${'x'.repeat(4096 - 8)}${req.headers['x-token']}`));
    const { job } = await t.service.createJob(t.actor, { endpointName: 'cut.api', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    const [attempt] = await attemptsOf(t, ex.id);
    expect(attempt.response_excerpt).not.toContain('cut-secr');
    expect(attempt.response_excerpt).toMatch(/^x+\[redacted\]$/);
  });

  it('records the outcome of a binary response, its NUL bytes shown as U+FFFD', async () => {
    await endpoint('binary.api', '/binary');
    target.route('/binary', (_req, res) =>
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x00, 0x00, 0x41])),
    );
    const { job } = await t.service.createJob(t.actor, { endpointName: 'binary.api', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex.status).toBe('SUCCEEDED');
    const [attempt] = await attemptsOf(t, ex.id);
    expect(attempt).toMatchObject({ outcome: 'SUCCEEDED', status_code: 200 });
    expect(attempt.response_excerpt).toBe('PK\u0003\u0004\uFFFD\uFFFDA');
  });

  it('fails at once, sending nothing, when a rendered header value carries a line break or a non-Latin-1 character', async () => {
    await endpoint('inject.api', '/inject', { headers: { 'x-customer': '{{input.name}}' } });
    target.route('/inject', (_req, res) => res.writeHead(200).end());
    for (const name of ['Ada\r\nx-admin: yes', '李雷']) {
      const { job } = await t.service.createJob(t.actor, { endpointName: 'inject.api', kind: 'IMMEDIATE', input: { name } });
      const ex = await settled(t, job.id);
      expect(ex, name).toMatchObject({ status: 'FAILED', attempt_count: 1 });
      expect(ex.last_error).toMatch(/cannot build the request: invalid x-customer header/);
    }
    expect(target.hitsOf('/inject')).toHaveLength(0);
  });

  it('fails at once, sending nothing, when an input value would move the url to another path (. or ..)', async () => {
    await endpoint('paths.api', '/v1/customers/{{input.id}}/notify');
    target.route('/v1/notify', (_req, res) => res.writeHead(200).end());
    target.route('/v1/customers/notify', (_req, res) => res.writeHead(200).end());
    target.route('/v1/customers/c..7/notify', (_req, res) => res.writeHead(200).end());
    for (const id of ['..', '.']) {
      const { job } = await t.service.createJob(t.actor, { endpointName: 'paths.api', kind: 'IMMEDIATE', input: { id } });
      const ex = await settled(t, job.id);
      expect(ex, id).toMatchObject({ status: 'FAILED', attempt_count: 1 });
      expect(ex.last_error).toMatch(/cannot build the request: an input value rendered into the url is "\.{1,2}"/);
    }
    expect(target.hitsOf('/v1/notify')).toHaveLength(0);
    expect(target.hitsOf('/v1/customers/notify')).toHaveLength(0);
    // Dots inside a value are only characters.
    const { job } = await t.service.createJob(t.actor, { endpointName: 'paths.api', kind: 'IMMEDIATE', input: { id: 'c..7' } });
    expect((await settled(t, job.id)).status).toBe('SUCCEEDED');
  });

  it('fails without retries when a placeholder names a missing config key', async () => {
    await endpoint('broken.template', '/ok/{{config.nope}}');
    const { job } = await t.service.createJob(t.actor, { endpointName: 'broken.template', kind: 'IMMEDIATE' });
    const ex = await settled(t, job.id);
    expect(ex).toMatchObject({ status: 'FAILED', attempt_count: 1 });
    expect(ex.last_error).toMatch(/config has no key "nope"/);
  });

  it.each([
    ['Expect', '100-continue', /expect header not supported/],
    ['Content-Length', '0', /content-length/i],
    ['Transfer-Encoding', 'chunked', /transfer-encoding/],
    ['Host', 'intranet.example', /headers name Host, which is taken from the url's host/],
  ])('fails without retries an endpoint registered with a %s header before registration refused it', async (name, value, error) => {
    const id = (await endpoint(`framed.${name.toLowerCase()}`, '/ok')).id;
    // As an endpoint registered by an earlier version, which took framing headers.
    await t.query(`update endpoints set headers = jsonb_build_object($2::text, $3::text) where id = $1`, [id, name, value]);
    const { job } = await t.service.createJob(t.actor, {
      endpointName: `framed.${name.toLowerCase()}`,
      kind: 'IMMEDIATE',
      input: { a: 1 },
    });
    const ex = await settled(t, job.id);
    expect(ex).toMatchObject({ status: 'FAILED', attempt_count: 1 });
    expect(ex.last_error).toMatch(/^cannot build the request: /);
    expect(ex.last_error).toMatch(error);
  });
});

describe('templates', () => {
  it.each(['constructor', '__proto__', 'toString', 'customer.hasOwnProperty'])(
    'refuses {{input.%s}}, which the input does not hold',
    (path) => {
      expect(() => render(`/x/{{input.${path}}}`, { config: {}, input: { customer: { id: 'c1' } } })).toThrow(TemplateError);
    },
  );

  it.each(['constructor', '__proto__', 'toString', 'hasOwnProperty'])(
    "refuses {{config.%s}}, which the endpoint's config does not hold",
    (key) => {
      const config = { token: { value: 't0k', secret: true } };
      expect(() => render(`/x/{{config.${key}}}`, { config, input: {} })).toThrow(`the endpoint's config has no key "${key}"`);
      expect(render('/x/{{config.token}}', { config, input: {} })).toBe('/x/t0k');
    },
  );
});

describe('Retry-After', () => {
  const now = Date.UTC(2030, 0, 1, 12, 0, 0);

  it('reads delta-seconds and HTTP-dates', () => {
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter('Tue, 01 Jan 2030 12:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Tuesday, 01-Jan-30 12:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Tue, 01 Jan 2030 11:00:00 GMT', now)).toBe(0);
  });

  it.each(['1.5', '-1', '+5', 'soon', ''])('ignores %j, leaving the endpoint backoff to decide', (value) => {
    expect(parseRetryAfter(value, now)).toBeUndefined();
  });

  it('reads an asctime date as GMT, whatever the local time zone', () => {
    const tz = process.env.TZ;
    process.env.TZ = 'America/New_York';
    try {
      expect(parseRetryAfter('Tue Jan  1 12:00:30 2030', now)).toBe(30_000);
    } finally {
      if (tz === undefined) delete process.env.TZ;
      else process.env.TZ = tz;
    }
  });
});
