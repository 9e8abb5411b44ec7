/**
 * The redactor over every form it owns (src/service/engine/redaction.ts), one row each, on a
 * secret holding every character some carrier changes. test/engine/redaction.test.ts drives the
 * same forms through a real echoing target.
 */
import { describe, expect, it } from 'vitest';
import { CARRIERS, createRedactor, FormsCache, REDACTED, secretForms, TWO_LAYERS_UP_TO } from '../../src/service/engine/redaction.js';

const SECRET = 'Pa"ss/w+rd &x=1\\é<>\'Zq`{}|^#?;:@$,~!()*[]%80d51d35';
const json = (s: string) => JSON.stringify(s).slice(1, -1);
const u4 = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
const lowerHex = (s: string) => s.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase());

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
