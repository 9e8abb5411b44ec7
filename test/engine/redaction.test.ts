/**
 * Secrets echoed back by a target, in the forms its own stack writes them in: none of them may
 * reach what a VIEWER reads (an execution's lastError, its attempts' error and response excerpt)
 * or what is stored (attempts and executions rows) or logged. The target is a real HTTP server
 * on loopback that decodes what jobgate sent it and writes it back transformed.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/service/kernel/actor.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { attemptsOf, engineHarness, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';

let t: TestDb;
let h: EngineHarness;
let g: TestGateway;
let target: HttpTarget;
let viewer: Actor;
let configId: string;

// Every character that some carrier escapes: a quote, slashes, a plus, a space, & and =, a
// non-ASCII letter, HTML's specials, and letters of both cases for the case-folding carriers.
const SECRET = `Pa"ss/w+rd &x=1\\é<>'Zq${randomBytes(4).toString('hex')}`;
// A secret that fits in a host name, with capitals that DNS errors give back lower-cased.
const HOST_SECRET = `TOK${randomBytes(4).toString('hex').toUpperCase()}`;

/** What each route wrote back, as it wrote it: the form of the secret that must not show. */
const echoed = new Map<string, string>();
const u4 = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
const htmlEscape = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

type Echo = (received: { secret: string; rawBody: string; url: string }, res: ServerResponse) => string;

const json = (s: string) => JSON.stringify(s).slice(1, -1);

/**
 * The forms, each a route: it answers with the secret as its stack writes it, and returns the
 * part of its answer that the secret alone determines (what must not show).
 */
const ECHOES: Record<string, Echo> = {
  // The JSON body jobgate sent, as it came: the secret JSON-escaped.
  'json-escaped': ({ secret, rawBody }, res) => (res.end(rawBody), json(secret)),
  // That body inside the target's own JSON answer: escaped twice.
  'json-escaped-twice': ({ secret, rawBody }, res) => (res.end(JSON.stringify({ received: rawBody })), json(json(secret))),
  // As Python's json.dumps writes it: non-ASCII as \u00e9.
  'json-ascii': ({ secret }, res) => {
    const form = json(secret).replace(/[^\x00-\x7f]/g, u4);
    res.end(`{"token":"${form}"}`);
    return form;
  },
  'percent-encoded-in-redirect': ({ secret }, res) => redirect(res, `${target.url}/next?t2=`, encodeURIComponent(secret)),
  'percent-encoded-lower-hex-in-redirect': ({ secret }, res) =>
    redirect(
      res,
      `${target.url}/next?t2=`,
      encodeURIComponent(secret).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
    ),
  'encodeURI-in-redirect': ({ secret }, res) => redirect(res, `${target.url}/next/`, encodeURI(secret)),
  // The query string jobgate sent, kept by a trailing-slash redirect: the URL parser's own encoding.
  'url-as-sent-in-redirect': ({ url }, res) => redirect(res, `${target.url}/next/?t=`, new URL(url, 'http://x').search.slice('?t='.length)),
  'form-encoded': ({ secret }, res) => {
    const form = new URLSearchParams({ token: secret }).toString().slice('token='.length);
    res.end(`token=${form}&other=x`);
    return form;
  },
  base64: ({ secret }, res) => base64(res, 'token ', '', secret, ''),
  base64url: ({ secret }, res) => base64(res, 'token ', '', secret, '??', 'base64url'),
  // Basic auth credentials: the secret's base64 at each of the three alignments, mid-text and at the end.
  ...Object.fromEntries(
    ['u:', 'us:', 'use:'].flatMap((user) => [
      [`basic-auth-${user.length}`, ((r, res) => base64(res, 'Authorization: Basic ', user, r.secret, '')) satisfies Echo],
      [`basic-auth-${user.length}-mid`, ((r, res) => base64(res, 'Authorization: Basic ', user, r.secret, ':more')) satisfies Echo],
    ]),
  ),
  'upper-cased': ({ secret }, res) => (res.end(`TOKEN ${secret.toUpperCase()}`), secret.toUpperCase()),
  'html-escaped': ({ secret }, res) => (res.end(`<p>you sent ${htmlEscape(secret)}</p>`), htmlEscape(secret)),
  // The JSON-escaped secret where the 4 KiB cap cuts through it, 6 bytes before the cap.
  'json-escaped-at-the-cap': ({ secret, rawBody }, res) => {
    const at = rawBody.indexOf(json(secret));
    res.end(`${'x'.repeat(4096 - 6 - at)}${rawBody}`);
    return json(secret);
  },
};

function redirect(res: ServerResponse, before: string, form: string): string {
  res.writeHead(302, { location: `${before}${form}` }).end();
  return form;
}

/** Answers base64 of before+secret+after; returns the characters that encode the secret's bits alone. */
function base64(
  res: ServerResponse,
  label: string,
  before: string,
  secret: string,
  after: string,
  alphabet: 'base64' | 'base64url' = 'base64',
): string {
  const text = Buffer.from(`${before}${secret}${after}`).toString(alphabet);
  res.end(`${label}${text}`);
  const from = Buffer.byteLength(before) * 8;
  const to = from + Buffer.byteLength(secret) * 8;
  return text.slice(Math.ceil(from / 6), Math.floor(to / 6));
}

/** A piece of `form` (n characters or more) left in `text`, ignoring case; undefined when none is. */
function pieceLeft(text: string, form: string, n = 6): string | undefined {
  const hay = text.toLowerCase();
  const needle = form.toLowerCase();
  for (let i = 0; i + n <= needle.length; i++) if (hay.includes(needle.slice(i, i + n))) return needle.slice(i, i + n);
  return undefined;
}

const EXECUTION = `query($id: ID!) { execution(id: $id) { status lastError attempts { error responseExcerpt } } }`;

async function run(endpointName: string): Promise<{ answer: string; rows: string }> {
  const { job } = await t.service.createJob(t.actor, { endpointName, kind: 'IMMEDIATE', input: { token: '{{config.tok}}', n: 1 } });
  const ex = await settled(t, job.id);
  const res = await g.gql(EXECUTION, { id: ex.id }, viewer);
  expect(res.errors).toBeUndefined();
  const e = res.data.execution;
  const answer = [
    e.lastError,
    ...e.attempts.flatMap((a: { error: string | null; responseExcerpt: string | null }) => [a.error, a.responseExcerpt]),
  ].join('\n');
  const rows = [ex.last_error, ...(await attemptsOf(t, ex.id)).flatMap((a) => [a.error, a.response_excerpt])].join('\n');
  return { answer, rows };
}

beforeAll(async () => {
  t = await createTestDb();
  target = await startHttpTarget();
  h = engineHarness(t);
  g = createTestGateway(t);
  await h.worker({ outboundAllow: ['127.0.0.0/8'], defaultTimeoutMs: 5000 });
  viewer = await t.service.authenticate((await t.service.createApiKey(t.actor, { name: 'viewer', role: 'VIEWER' })).key);
  const config = await t.service.setConfig(t.actor, {
    name: 'echo.settings',
    entries: [
      { key: 'tok', value: SECRET, secret: true },
      { key: 'htok', value: HOST_SECRET, secret: true },
    ],
  });
  configId = config.id;
  for (const [name, echo] of Object.entries(ECHOES)) {
    target.route(`/echo/${name}`, (req: IncomingMessage, res: ServerResponse) => {
      const hit = target.hitsOf(`/echo/${name}`).at(-1)!;
      const secret = (JSON.parse(hit.body) as { token: string }).token;
      echoed.set(name, echo({ secret, rawBody: hit.body, url: req.url! }, res));
    });
    await t.service.registerEndpoint(t.actor, {
      name: `echo.${name.toLowerCase()}`,
      kind: 'HTTP',
      // The secret also rides in the query string, unencoded, as a config value does.
      url: `${target.url}/echo/${name}?t={{config.tok}}`,
      configId,
      maxAttempts: 1,
    });
  }
});
afterAll(async () => {
  await h.stopAll();
  await g.close();
  await target.close();
  await t.close();
});

describe('a secret echoed back by the target', () => {
  it.each(Object.keys(ECHOES))('is redacted when it comes back %s', async (name) => {
    const { answer, rows } = await run(`echo.${name.toLowerCase()}`);
    const form = echoed.get(name)!;
    // The route did echo it, in a form other than the plain secret for all but the cap case.
    expect(form).toBeTruthy();
    expect(answer).toContain('[redacted]');
    for (const text of [answer, rows]) {
      expect(pieceLeft(text, form), `${name}: ${text}`).toBeUndefined();
      expect(pieceLeft(text, SECRET), `${name}: ${text}`).toBeUndefined();
    }
  });

  it('is redacted when a DNS error gives back the host name it was rendered into, lower-cased', async () => {
    await t.service.registerEndpoint(t.actor, {
      name: 'echo.host',
      kind: 'HTTP',
      url: 'http://host{{config.htok}}.invalid/',
      configId,
      maxAttempts: 1,
    });
    const { answer, rows } = await run('echo.host');
    expect(answer).toMatch(/network error: .*host\[redacted\]\.invalid/);
    for (const text of [answer, rows]) expect(pieceLeft(text, HOST_SECRET), text).toBeUndefined();
  });

  it('leaves no form of a secret in the log', () => {
    const logs = h.logs.join('\n');
    for (const form of [SECRET, HOST_SECRET, ...echoed.values()]) expect(pieceLeft(logs, form)).toBeUndefined();
  });
});
