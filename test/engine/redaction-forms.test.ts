/**
 * The redactor over every form it owns (src/service/engine/delivery/redaction.ts and the decoded views of
 * src/service/engine/delivery/escapes.ts), one row each, on a secret holding every character some carrier
 * changes: first on the redactor alone, then end to end, each form echoed by a real HTTP target
 * and its response excerpt read back over GraphQL by a VIEWER. test/engine/redaction.test.ts
 * drives the ways a secret comes back besides a body (redirects, errors, the cap).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/service/kernel/actor.js';
import {
  CARRIERS,
  createRedactor,
  FormsCache,
  REDACTED,
  secretForms,
  TWO_LAYERS_UP_TO,
} from '../../src/service/engine/delivery/redaction.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, settled, type EngineHarness } from '../support/engine.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';

const SECRET = 'Pa"ss/w+rd &x=1\\é<>\'Zq`{}|^#?;:@$,~!()*[]%80d51d35';
const json = (s: string) => JSON.stringify(s).slice(1, -1);
const u4 = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
const lowerHex = (s: string) => s.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase());

const hex2 = (b: number) => b.toString(16).toUpperCase().padStart(2, '0');
const bytesOf = (s: string) => [...Buffer.from(s, 'utf8')];
const base64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const utf16be = (s: string) => Buffer.from(s, 'utf16le').swap16();

/** `text` cut into lines of `width` characters, the first line already `column` long. */
function wrapped(text: string, width: number, column: number, eol: string): string {
  let out = '';
  let col = column;
  for (const ch of text) {
    if (col === width) {
      out += eol;
      col = 0;
    }
    out += ch;
    col++;
  }
  return out;
}

/**
 * Quoted-printable (RFC 2045) as a mailer writes it, the line already `column` long: printable
 * ASCII but `=` as it is (with `all`, every byte escaped), soft line breaks keeping lines to 76
 * characters, never inside an escape.
 */
function quotedPrintable(s: string, column: number, all = false): string {
  let out = '';
  let col = column;
  for (const ch of s) {
    const bytes = bytesOf(ch);
    const literal = !all && bytes.length === 1 && bytes[0]! > 32 && bytes[0]! < 127 && ch !== '=';
    const piece = literal ? ch : bytes.map((b) => `=${hex2(b)}`).join('');
    if (col + piece.length > 75) {
      out += '=\r\n';
      col = 0;
    }
    out += piece;
    col += piece.length;
  }
  return out;
}

/** Each form a target may give the secret back in, as that target's stack writes it. */
const FORMS: [string, (s: string) => string][] = [
  ['as sent (a header)', (s) => s],
  ["JSON-escaped (jobgate's own body)", json],
  ['JSON-escaped twice (a body echoed inside JSON)', (s) => json(json(s))],
  ['JSON, non-ASCII as \\u (Python)', (s) => json(s).replace(/[^\x00-\x7f]/g, u4)],
  [
    'JSON, \\u and \\/ (PHP)',
    (s) =>
      json(s)
        .replace(/[^\x00-\x7f]/g, u4)
        .replace(/\//g, '\\/'),
  ],
  ['JSON, HTML-safe (Go)', (s) => json(s).replace(/[<>&]/g, u4)],
  ['encodeURIComponent', encodeURIComponent],
  ['encodeURIComponent, lower-case hex', (s) => lowerHex(encodeURIComponent(s))],
  ['encodeURI', encodeURI],
  ['encodeURI, lower-case hex', (s) => lowerHex(encodeURI(s))],
  ['form-encoded (URLSearchParams)', (s) => new URLSearchParams({ a: s }).toString().slice(2)],
  ['form-encoded, + for space over encodeURIComponent', (s) => encodeURIComponent(s).replace(/%20/g, '+')],
  ['RFC 3986 unreserved only', (s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)],
  ['as the URL parser sends it in a query', (s) => new URL(`http://h/?${s.replace(/#/g, '%23')}`).search.slice(1)],
  ['as the URL parser sends it in a fragment', (s) => new URL(`http://h/#${s}`).hash.slice(1)],
  ['percent-encoded twice', (s) => encodeURIComponent(encodeURIComponent(s))],
  ['JSON body in a redirect query', (s) => encodeURIComponent(json(s))],
  ['a url echoed inside JSON', (s) => json(encodeURI(s))],
  [
    'HTML-escaped',
    (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;'),
  ],
  ['HTML-escaped, numeric', (s) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)],
  ['upper-cased', (s) => s.toUpperCase()],
  ['lower-cased (a host name)', (s) => s.toLowerCase()],
  ['base64', (s) => Buffer.from(s).toString('base64')],
  ['base64url', (s) => Buffer.from(s).toString('base64url')],
  ['base64 of the JSON-escaped body', (s) => Buffer.from(json(s)).toString('base64')],
  // Every character written differently: found by decoding the text (src/service/engine/delivery/escapes.ts).
  ['as HTML decimal references, every character', (s) => [...s].map((c) => `&#${c.codePointAt(0)};`).join('')],
  ['as HTML hex references, every character', (s) => [...s].map((c) => `&#x${c.codePointAt(0)!.toString(16)};`).join('')],
  [
    'as HTML references, decimal and padded upper-case hex mixed, some without ";"',
    (s) => [...s].map((c, i) => (i % 2 ? `&#${c.codePointAt(0)}` : `&#X00${c.codePointAt(0)!.toString(16).toUpperCase()};`)).join(''),
  ],
  ['as \\u escapes, every character', (s) => s.split('').map(u4).join('')],
  [
    'percent-encoded, every byte',
    (s) =>
      bytesOf(s)
        .map((b) => `%${hex2(b)}`)
        .join(''),
  ],
  [
    'percent-encoded, every byte, lower-case hex',
    (s) =>
      bytesOf(s)
        .map((b) => `%${hex2(b).toLowerCase()}`)
        .join(''),
  ],
  ['as hex of its bytes, lower-case', (s) => Buffer.from(s).toString('hex')],
  ['as hex of its bytes, upper-case', (s) => Buffer.from(s).toString('hex').toUpperCase()],
  ['base64 wrapped at 76 columns with CRLF (MIME)', (s) => wrapped(base64(s), 76, 40, '\r\n')],
  ['base64 wrapped at 64 columns with LF (PEM)', (s) => wrapped(base64(s), 64, 30, '\n')],
  ['base64 of its UTF-16LE', (s) => Buffer.from(s, 'utf16le').toString('base64')],
  ['base64 of its UTF-16BE', (s) => utf16be(s).toString('base64')],
  ['quoted-printable, every byte, soft line breaks', (s) => quotedPrintable(s, 50, true)],
  ['quoted-printable, a soft line break inside it', (s) => quotedPrintable(s, 60)],
];

describe('the redactor', () => {
  const redactor = createRedactor([SECRET]);

  it.each(FORMS)('replaces the secret %s', (_name, form) => {
    const text = `before ${form(SECRET)} after`;
    expect(redactor.redact(text)).toBe(`before ${REDACTED} after`);
  });

  // Basic auth (`user:secret`) and any longer base64 text: the secret's bytes fall at one of three
  // alignments, at the end of the text (padded) or inside it.
  it.each(['', 'u:', 'us:', 'use:'].flatMap((user) => ['', ':tail', 'xy'].map((tail) => [user, tail])))(
    'replaces the base64 of the secret inside base64 of "%s<secret>%s", all but at most one character either side',
    (user, tail) => {
      for (const alphabet of ['base64', 'base64url'] as const) {
        const encoded = Buffer.from(`${user}${SECRET}${tail}`).toString(alphabet);
        const out = redactor.redact(`Basic ${encoded}`).slice('Basic '.length);
        // Characters from..to encode the secret's bits alone; one either side mixes in a neighbour's.
        const from = Math.ceil((Buffer.byteLength(user) * 8) / 6);
        const to = Math.floor(((Buffer.byteLength(user) + Buffer.byteLength(SECRET)) * 8) / 6);
        const at = out.indexOf(REDACTED);
        expect(at, out).toBeGreaterThanOrEqual(0);
        const left = out.slice(0, at);
        const right = out.slice(at + REDACTED.length);
        expect(encoded.startsWith(left) && encoded.endsWith(right), out).toBe(true);
        // All of the secret's own characters are gone, and little of the neighbours'.
        expect(left.length).toBeLessThanOrEqual(from);
        expect(left.length).toBeGreaterThanOrEqual(from - 1);
        expect(encoded.length - right.length).toBeGreaterThanOrEqual(to);
        expect(encoded.length - right.length).toBeLessThanOrEqual(to + (tail ? 1 : 3));
      }
    },
  );

  // A key or a certificate: base64 of a longer text, wrapped, with the secret's bytes at each alignment and across a line break.
  it.each(['', 'u:', 'us:', 'use:'].flatMap((user) => ['\n', '\r\n'].map((eol) => [user, eol])))(
    'replaces the base64 of the secret inside wrapped base64 of "<30 bytes>%s<secret>:tail" (line break %j)',
    (user, eol) => {
      const before = `${'k'.repeat(30)}${user}`;
      const encoded = base64(`${before}${SECRET}:tail`);
      for (const width of [64, 76]) {
        const out = redactor.redact(wrapped(encoded, width, 0, eol));
        const at = out.indexOf(REDACTED);
        expect(at, out).toBeGreaterThanOrEqual(0);
        const left = out.slice(0, at).replace(/\r?\n/g, '');
        const right = out.slice(at + REDACTED.length).replace(/\r?\n/g, '');
        expect(encoded.startsWith(left) && encoded.endsWith(right), out).toBe(true);
        const from = Math.ceil((Buffer.byteLength(before) * 8) / 6);
        const to = Math.floor(((Buffer.byteLength(before) + Buffer.byteLength(SECRET)) * 8) / 6);
        expect(left.length).toBeLessThanOrEqual(from);
        expect(left.length).toBeGreaterThanOrEqual(from - 1);
        expect(encoded.length - right.length).toBeGreaterThanOrEqual(to);
        expect(encoded.length - right.length).toBeLessThanOrEqual(to + 1);
      }
    },
  );

  it('reads each escape family alone: an escape of another family in the secret is its text', () => {
    // The secret holds "%80" and "=1\\": decoded as percent or quoted-printable escapes, its
    // HTML or \\u form would not read back as the secret.
    const r = createRedactor(['ab%41cd=3Def']);
    expect(r.redact(`x ${[...'ab%41cd=3Def'].map((c) => `&#${c.charCodeAt(0)};`).join('')} y`)).toBe(`x ${REDACTED} y`);
    expect(r.redact(`x ${'ab%41cd=3Def'.split('').map(u4).join('')} y`)).toBe(`x ${REDACTED} y`);
    // Escapes that decode to no secret leave the text as it was.
    expect(r.redact('x &#65;&#66; %41%42 =41=42 \\u0041 y')).toBe('x &#65;&#66; %41%42 =41=42 \\u0041 y');
  });

  it("sends the WHATWG percent-encode sets exactly as Node's URL parser does", () => {
    const chars = [...Array.from({ length: 0x5f }, (_, i) => String.fromCharCode(0x20 + i)), '\t', '\n', '\r', 'é', '\u00ff', '€'];
    for (const c of chars) {
      const path = new URL(`http://h/a${c}a`).pathname;
      // `?` and `#` end the path and the query: they are delimiters there, sent as they are.
      if (c !== '?' && c !== '#') expect(CARRIERS['url-path']!(`a${c}a`), JSON.stringify(c)).toBe(path.slice(1));
      if (c !== '#') expect(CARRIERS['url-special-query']!(`a${c}a`), JSON.stringify(c)).toBe(new URL(`http://h/?a${c}a`).search.slice(1));
      if (c !== '#') expect(CARRIERS['url-query']!(`a${c}a`), JSON.stringify(c)).toBe(new URL(`foo://h/?a${c}a`).search.slice(1));
      expect(CARRIERS['url-fragment']!(`a${c}a`), JSON.stringify(c)).toBe(new URL(`http://h/#a${c}a`).hash.slice(1));
      // These end the userinfo (a backslash is a slash in a special url's authority).
      if (!'/?#@:\\'.includes(c)) expect(CARRIERS['url-userinfo']!(`a${c}a`), JSON.stringify(c)).toBe(new URL(`http://a${c}a@h/`).username);
      expect(CARRIERS['url-form']!(`a${c}a`), JSON.stringify(c)).toBe(
        new URLSearchParams({ x: `a${c}a` }).toString().slice(2).replace(/\+/g, '%20'),
      );
      expect(CARRIERS['url-form+']!(`a${c}a`), JSON.stringify(c)).toBe(new URLSearchParams({ x: `a${c}a` }).toString().slice(2));
      expect(CARRIERS.encodeURIComponent!(`a${c}a`)).toBe(encodeURIComponent(`a${c}a`));
      expect(CARRIERS.encodeURI!(`a${c}a`)).toBe(encodeURI(`a${c}a`));
    }
  });

  it('cuts a text only after redacting it: a form across the cut is replaced whole, the rest dropped', () => {
    const form = json(SECRET);
    const text = `${'x'.repeat(100)}${form}${'y'.repeat(50)}`;
    expect(redactor.redactPrefix(text, 104)).toBe(`${'x'.repeat(100)}${REDACTED}`);
    expect(redactor.redactPrefix(text, 100)).toBe('x'.repeat(100));
    expect(redactor.redactPrefix(text, 10_000)).toBe(`${'x'.repeat(100)}${REDACTED}${'y'.repeat(50)}`);
    expect(redactor.longestFormBytes).toBeGreaterThanOrEqual(Buffer.byteLength(encodeURIComponent(encodeURIComponent(SECRET))));
  });

  it('merges overlapping forms and secrets, so that no piece of one is left between them', () => {
    const r = createRedactor(['abcdef12', 'ef12ghij']);
    expect(r.redact('x abcdef12ghij y')).toBe(`x ${REDACTED} y`);
    // A form inside another form's match.
    expect(createRedactor([SECRET]).redact(`${encodeURIComponent(json(SECRET))}${SECRET}`)).toBe(REDACTED);
  });

  it('folds case character by character: positions hold when folding would lengthen text (İ)', () => {
    expect(createRedactor(['Secret-99']).redact('İİİ secret-99 İ')).toBe(`İİİ ${REDACTED} İ`);
    // Folded the same alone and inside longer text: a final sigma, a character beyond the BMP.
    expect(createRedactor(['ΑΒΓΣ-İx-𐐀z']).redact('x αβγσ-İX-𐐨Z y | ΑΒΓΣ-İX-𐐀Z')).toBe(`x ${REDACTED} y | ${REDACTED}`);
  });

  it('changes nothing when run twice, even for a secret that "[redacted]" contains', () => {
    for (const secret of [SECRET, 'dacted', 'redacted]']) {
      const r = createRedactor([secret]);
      const once = r.redact(`a ${secret} b ${json(secret)} c`);
      expect(once).toBe(`a ${REDACTED} b ${REDACTED} c`);
      expect(r.redact(once)).toBe(once);
    }
  });

  it('leaves values shorter than the stored minimum alone, and text without secrets as it is', () => {
    expect(createRedactor(['abc']).redact('abc abc')).toBe('abc abc');
    expect(createRedactor([]).redact('nothing here')).toBe('nothing here');
  });

  it(`redacts a secret longer than ${TWO_LAYERS_UP_TO} characters in every single form, and JSON-escaped twice`, () => {
    const long = `-----BEGIN KEY-----\n${'MIIEvQIBADANBgkq+/hkiG9w0BAQ"EFAASC\\'.repeat(120)}\n-----END KEY-----`;
    expect(long.length).toBeGreaterThan(TWO_LAYERS_UP_TO);
    const r = createRedactor([long], new FormsCache());
    for (const [name, form] of FORMS.filter(([n]) => !/twice|redirect query|inside JSON/.test(n))) {
      expect(r.redact(`a ${form(long)} b`), name).toBe(`a ${REDACTED} b`);
    }
    expect(r.redact(`a ${json(json(long))} b`)).toBe(`a ${REDACTED} b`);
  });

  it('lists each form once', () => {
    const forms = secretForms(SECRET);
    expect(new Set(forms).size).toBe(forms.length);
    expect(forms).toContain(SECRET.toLowerCase());
  });
});

describe('every form, echoed by a real target and read back by a VIEWER over GraphQL', () => {
  let t: TestDb;
  let h: EngineHarness;
  let g: TestGateway;
  let target: HttpTarget;
  let viewer: Actor;

  beforeAll(async () => {
    t = await createTestDb();
    target = await startHttpTarget();
    h = engineHarness(t);
    g = createTestGateway(t);
    await h.worker({ outboundAllow: ['127.0.0.0/8'], defaultTimeoutMs: 5000 });
    viewer = await t.service.authenticate((await t.service.createApiKey(t.actor, { name: 'viewer', role: 'VIEWER' })).key);
    const config = await t.service.setConfig(t.actor, { name: 'echo.forms', entries: [{ key: 'tok', value: SECRET, secret: true }] });
    for (const [i, [, form]] of FORMS.entries()) {
      // The target writes back the token it was sent (the secret, rendered into the body), in its form.
      target.route(`/form/${i}`, (_req, res) => {
        const { token } = JSON.parse(target.hitsOf(`/form/${i}`).at(-1)!.body) as { token: string };
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(`before ${form(token)} after`);
      });
      await t.service.registerEndpoint(t.actor, {
        name: `echo.form-${i}`,
        kind: 'HTTP',
        url: `${target.url}/form/${i}`,
        configId: config.id,
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

  it.each(FORMS.map(([name], i) => [name, i] as const))('keeps the secret %s out of the response excerpt', async (_name, i) => {
    const { job } = await t.service.createJob(t.actor, {
      endpointName: `echo.form-${i}`,
      kind: 'IMMEDIATE',
      input: { token: '{{config.tok}}' },
    });
    const ex = await settled(t, job.id);
    const res = await g.gql(`query ($id: ID!) { execution(id: $id) { attempts { responseExcerpt } } }`, { id: ex.id }, viewer);
    expect(res.errors).toBeUndefined();
    expect(res.data.execution.attempts.map((a: { responseExcerpt: string }) => a.responseExcerpt)).toEqual([`before ${REDACTED} after`]);
  });
});
