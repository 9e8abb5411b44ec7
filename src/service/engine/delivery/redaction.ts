/**
 * Keeping secrets out of what jobgate records about an outbound request: response excerpts,
 * attempt errors, `lastError`, and the log lines and notifications built from them. Every one of
 * those is built from text a target or the network chose (a body, a redirect's Location, a DNS
 * error), and a target that echoes what it received hands the secret back in whatever form its
 * own stack wrote it in. So a secret is looked for in every form it can take on the way out and
 * back, not only as its exact text. This module owns that list; nothing else redacts.
 *
 * The forms of a secret `s` (see `secretForms`):
 *
 *  - carriers, each one transformation of text:
 *      JSON string content, as JavaScript writes it (jobgate's own request body), as Python
 *        writes it (non-ASCII as \uXXXX), as PHP writes it (that, and `/` as `\/`), and as Go
 *        writes it (`<`, `>`, `&` as \u003c...);
 *      percent-encoding with each common set of characters left as they are: the WHATWG URL
 *        parser's sets for fragment, query, special query, path (which also turns `\` into `/`)
 *        and userinfo, after it drops tabs and line breaks (what `new URL` sends for a config
 *        value rendered into a url unencoded),
 *        its component and form sets, encodeURIComponent, encodeURI, and RFC 3986's unreserved
 *        set; each also with `+` for a space (form encoding);
 *      HTML escaping, with named (`&quot;`) and numeric (`&#34;`) references;
 *  - `s` itself, every carrier of `s`, and every carrier of those: two layers, in any order
 *    (a JSON body echoed inside JSON, a JSON body echoed into a redirect's query string, a url
 *    echoed inside JSON, a percent-encoded value encoded again). Past TWO_LAYERS_UP_TO
 *    characters, two layers only of JSON;
 *  - base64 and base64url of `s` and of its JSON forms, at each of the 3 alignments a secret can
 *    have inside a longer base64 text (Basic auth's `user:secret`, an echoed body): the
 *    characters that depend on the secret's bytes alone, and, for a secret that ends the encoded
 *    text, its last characters and padding too. A character that mixes the secret's first or
 *    last bits with a neighbour's is left, so up to 4 bits of the secret can show on each side
 *    of such a match: not enough to use it.
 *  - from its bytes: base64 of its UTF-16 (either byte order, at each alignment), hex of its UTF-8;
 *  - in each decoded view of the text (./escapes.ts: HTML references, backslash escapes,
 *    percent and quoted-printable bytes, wrapped lines undone), `s` and each one carrier of it
 *    and its byte forms: the encodings that write every character (`&#115;&#x65;`, `\u0073`,
 *    `%73`, `=73`, a mailer's soft line breaks) cannot be listed as forms, since each character
 *    may be written any of several ways. A view is searched only near where it differs from the
 *    text. Measured (CPU per 4 KiB excerpt, one 32-character secret, a loaded 2-core machine):
 *    JSON without escapes 5 -> 16 µs, pretty-printed 6 -> 45 µs, HTML with an entity a line
 *    6 -> 220 µs, text dense with every family's escapes 8 -> 520 µs;
 *  - all of them matched case-insensitively: host names come back lower-cased (a DNS error),
 *    hex digits come in either case, and some targets upper-case what they echo. Over-redacting
 *    text that equals a secret but for case costs nothing.
 *
 * Not covered: a secret rendered into a host name with non-ASCII characters comes back in
 * Punycode of its whole label, which depends on the rest of the label; encodings beyond two
 * layers (a decoded view and one carrier count as two); escapes of two families mixed in one
 * secret; hex with separators; compressed or encrypted echoes. Secrets shorter than MIN_SECRET_LENGTH are refused when
 * stored (they would blank ordinary text).
 *
 * Matches of all forms of all secrets are merged before anything is replaced, so overlapping
 * forms (a JSON form inside a base64 one, two secrets sharing text) cannot leave a piece of one.
 * Search is plain substring search on case-folded text: linear, whatever a target sends.
 */
import { MIN_SECRET_LENGTH } from '../../kernel/inputs.js';
import { decodedViews } from './escapes.js';

export const REDACTED = '[redacted]';

type Carrier = (s: string) => string;

const hex2 = (n: number) => `%${n.toString(16).toUpperCase().padStart(2, '0')}`;
const utf8Percent = (ch: string) => [...Buffer.from(ch, 'utf8')].map(hex2).join('');

/**
 * Percent-encoding that leaves letters, digits and the ASCII characters in `keep` as they are,
 * and encodes everything else (controls, other ASCII, every non-ASCII character) as UTF-8 bytes.
 */
function percent(keep: string, spaceAsPlus = false): Carrier {
  const encoded = new RegExp(`[^A-Za-z0-9${keep.replace(/[\\\]^-]/g, '\\$&')}]`, 'gu');
  return (s) => s.replace(encoded, (ch) => (ch === ' ' && spaceAsPlus ? '+' : utf8Percent(ch)));
}

/** Printable ASCII that is neither a letter nor a digit, less `encoded`. */
const punctuationBut = (encoded: string) => [...'!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'].filter((c) => !encoded.includes(c)).join('');

// The WHATWG URL standard's percent-encode sets (each the one before it plus a few characters),
// the parsed ones as this Node's URL parser applies them (checked in test/engine/redaction-forms.test.ts).
const FRAGMENT = ' "<>`';
const QUERY = ' "#<>';
const SPECIAL_QUERY = `${QUERY}'`;
const PATH = `${QUERY}?\`{}`;
const USERINFO = `${PATH}/:;=@[\\]^|`;
const COMPONENT = `${USERINFO}$%&+,`;
const FORM = `${COMPONENT}!'()~`;

/**
 * What this Node's URL parser leaves as it is, read from the parser itself: its sets follow the
 * standard as its version has it (Node 24 encodes `^` in a path, Node 20 and 22 do not). The
 * characters a part treats as delimiters cannot be probed there and keep the standard's verdict.
 */
function keptByParser(standard: string, probe: (c: string) => string, delimiters: string): string {
  return [...punctuationBut('')]
    .filter((c) => {
      if (delimiters.includes(c)) return standard.includes(c);
      try {
        return probe(`a${c}a`) === `a${c}a`;
      } catch {
        return standard.includes(c);
      }
    })
    .join('');
}

const PERCENT_SETS: Record<string, string> = {
  'url-fragment': keptByParser(punctuationBut(FRAGMENT), (s) => new URL(`http://h/#${s}`).hash.slice(1), ''),
  'url-query': keptByParser(punctuationBut(QUERY), (s) => new URL(`foo://h/?${s}`).search.slice(1), '#'),
  'url-special-query': keptByParser(punctuationBut(SPECIAL_QUERY), (s) => new URL(`http://h/?${s}`).search.slice(1), '#'),
  'url-path': keptByParser(punctuationBut(PATH), (s) => new URL(`http://h/${s}`).pathname.slice(1), '?#\\'),
  'url-userinfo': keptByParser(punctuationBut(USERINFO), (s) => new URL(`http://${s}@h/`).username, '/?#@:\\'),
  'url-component': punctuationBut(COMPONENT),
  'url-form': punctuationBut(FORM),
  encodeURIComponent: "-_.!~*'()",
  encodeURI: "-_.!~*'();,/?:@&=+$#",
  rfc3986: '-_.~',
};

const u4 = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
const jsonContent: Carrier = (s) => JSON.stringify(s).slice(1, -1);

const HTML_NAMED: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Each carrier by name; the names show in the unit test's table. */
export const CARRIERS: Record<string, Carrier> = {
  json: jsonContent,
  'json-ascii': (s) => jsonContent(s).replace(/[^\x00-\x7f]/g, u4),
  'json-php': (s) =>
    jsonContent(s)
      .replace(/[^\x00-\x7f]/g, u4)
      .replace(/\//g, '\\/'),
  'json-go': (s) => jsonContent(s).replace(/[<>&\u2028\u2029]/g, u4),
  ...Object.fromEntries(
    Object.entries(PERCENT_SETS).flatMap(([name, keep]) => {
      // The URL parser drops tabs and line breaks before anything else, and reads a backslash in
      // a special url's path as a slash.
      const parsed = ['url-fragment', 'url-query', 'url-special-query', 'url-path', 'url-userinfo'].includes(name);
      const strip = (s: string) => (parsed ? s.replace(/[\t\n\r]/g, '') : s);
      const pre = name === 'url-path' ? (s: string) => strip(s).replace(/\\/g, '/') : strip;
      const plain = percent(keep);
      const plus = percent(keep, true);
      return [
        [name, (s: string) => plain(pre(s))],
        [`${name}+`, (s: string) => plus(pre(s))],
      ];
    }),
  ),
  html: (s) => s.replace(/[&<>"']/g, (c) => HTML_NAMED[c]!),
  'html-numeric': (s) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`),
};

const JSON_CARRIERS = ['json', 'json-ascii', 'json-php', 'json-go'];

/**
 * The parts of base64 (and base64url) of `bytes` that show wherever they sit in a longer
 * base64 text: at each byte alignment, the characters fixed by its bytes alone, and the same
 * with the tail it has when it ends the encoded text (padded and unpadded).
 */
function base64Forms(bytes: Buffer): string[] {
  const out: string[] = [];
  for (const lead of [0, 1, 2]) {
    const padded = Buffer.concat([Buffer.alloc(lead), bytes]);
    // With 1 or 2 bytes before it, the first 2 or 3 characters also encode those bytes.
    const skip = [0, 2, 3][lead]!;
    const rest = padded.length % 3;
    for (const alphabet of ['base64', 'base64url'] as const) {
      const full = padded.toString(alphabet);
      const unpadded = full.replace(/=+$/, '');
      // Mid-text, the last character of an incomplete group also encodes the next byte's bits.
      out.push(unpadded.slice(skip, rest === 0 ? unpadded.length : unpadded.length - 1));
      out.push(unpadded.slice(skip), full.slice(skip));
    }
  }
  return out;
}

/**
 * Case folding character by character, keeping each where it was: a plain toLowerCase can
 * lengthen text ("İ" becomes two units) and folds by context (a final "Σ"), so positions found in
 * folded text would not be positions in the text, and a secret could fold differently alone
 * than inside a longer text.
 */
function fold(text: string): string {
  if (/^[\x00-\x7f]*$/.test(text)) return text.toLowerCase();
  return text
    .replace(/[^\x00-\x7f]/gu, (ch) => {
      const lower = ch.toLowerCase();
      return lower.length === ch.length ? lower : ch;
    })
    .replace(/[A-Z]+/g, (run) => run.toLowerCase());
}

/**
 * Longest secret whose forms are built two layers deep. Two layers cost about 700 passes over
 * text a few times the secret's length (~100 ms for 2 KiB of punctuation, once per secret per
 * worker); longer secrets (key files, certificates) get one layer, plus JSON in JSON.
 */
export const TWO_LAYERS_UP_TO = 2048;

/**
 * The forms of `secret` written from its bytes: base64 of its UTF-8 (and of its JSON forms), of
 * its UTF-16 in either byte order (Windows, Java and .NET strings, PowerShell's encoded
 * commands), and its UTF-8 in hex.
 */
function byteForms(secret: string): string[] {
  const utf16le = Buffer.from(secret, 'utf16le');
  const texts = [secret, ...JSON_CARRIERS.map((name) => CARRIERS[name]!(secret))].map((t) => Buffer.from(t, 'utf8'));
  return [...[...texts, utf16le, Buffer.from(utf16le).swap16()].flatMap(base64Forms), Buffer.from(secret, 'utf8').toString('hex')];
}

const folded = (forms: Iterable<string>) =>
  [...new Set([...forms].map(fold))].filter((f) => f.length > 0).sort((a, b) => b.length - a.length);

/** Every form of `secret` that redaction looks for in a text (see the module comment), longest first. */
export function secretForms(secret: string): string[] {
  const deep = secret.length <= TWO_LAYERS_UP_TO;
  const forms = new Set<string>([secret]);
  for (const [name, outer] of Object.entries(CARRIERS)) {
    const once = outer(secret);
    forms.add(once);
    for (const [innerName, inner] of Object.entries(CARRIERS)) {
      if (deep || (JSON_CARRIERS.includes(name) && JSON_CARRIERS.includes(innerName))) forms.add(inner(once));
    }
  }
  for (const form of byteForms(secret)) forms.add(form);
  return folded(forms);
}

/**
 * The forms looked for in a decoded view of a text (./escapes.ts): the view has undone one layer,
 * so one carrier is left to find (or none, or the bytes' encodings). Two carriers as well would
 * triple the search of each view for a third layer that no stack writes.
 */
export function viewForms(secret: string): string[] {
  return folded([secret, ...Object.values(CARRIERS).map((carrier) => carrier(secret)), ...byteForms(secret)]);
}

/**
 * Forms by secret, kept across attempts (building them costs far more than searching for them),
 * up to a budget of characters: past it the cache starts over, keeping the newest, rather than
 * grow. The largest secret allowed (64 KiB) has under 10 million characters of forms.
 */
export interface Forms {
  /** Looked for in the text. */
  text: string[];
  /** Looked for in each decoded view of it. */
  views: string[];
}

const formsOf = (secret: string): Forms => ({ text: secretForms(secret), views: viewForms(secret) });

export class FormsCache {
  private readonly forms = new Map<string, Forms>();
  private chars = 0;
  constructor(private readonly budgetChars = 16_000_000) {}

  get(secret: string): Forms {
    let forms = this.forms.get(secret);
    if (forms) return forms;
    forms = formsOf(secret);
    const size = [...forms.text, ...forms.views].reduce((n, f) => n + f.length, 0);
    if (this.chars + size > this.budgetChars) {
      this.forms.clear();
      this.chars = 0;
    }
    this.forms.set(secret, forms);
    this.chars += size;
    return forms;
  }
}

export interface Redactor {
  /**
   * `text` with every form of every secret replaced by "[redacted]". Text that already holds
   * the marker (an excerpt quoted in an error) is redacted between markers, so that redacting
   * twice changes nothing, even for a secret that "[redacted]" happens to contain.
   */
  redact(text: string): string;
  /**
   * The first `limit` characters of `text`, redacted, cut only after redaction: when a form of a
   * secret starts before `limit` and ends after it, the cut moves to its end, so that it is
   * replaced whole (cut first, and its start would be left in clear).
   */
  redactPrefix(text: string, limit: number): string;
  /** Bytes a form of a secret can take at most: read this far past a cap to see it whole. */
  longestFormBytes: number;
}

/**
 * A redactor for `secrets` (secret config values, the signing secret). Values shorter than
 * MIN_SECRET_LENGTH are ignored: they would blank ordinary text, and storing one is refused.
 * `cache` keeps the forms of secrets across attempts.
 */
export function createRedactor(secrets: Iterable<string>, cache?: FormsCache): Redactor {
  const forms: string[] = [];
  const inViews: string[] = [];
  for (const secret of new Set(secrets)) {
    if (secret.length < MIN_SECRET_LENGTH) continue;
    const f = cache ? cache.get(secret) : formsOf(secret);
    forms.push(...f.text);
    inViews.push(...f.views);
  }
  const bytes = (list: string[]) => Math.max(0, ...list.map((f) => Buffer.byteLength(f)));
  // In a view, a form may have been written 6 bytes a byte (`&#126;`, `\u007e`), and wrapped.
  const longestFormBytes = Math.max(bytes(forms), 7 * bytes(inViews));
  const longestViewForm = Math.max(0, ...inViews.map((f) => f.length));

  /** Where forms occur in `text`, and in its decoded views, merged into disjoint, sorted [start, end) spans. */
  function spans(text: string): [number, number][] {
    if (forms.length === 0 || text.length === 0) return [];
    const found: [number, number][] = [];
    search(fold(text), forms, (s, e) => found.push([s, e]));
    for (const view of decodedViews(text)) {
      // Only where the view differs from its parent: a form found elsewhere in it is found in the parent.
      for (const [ws, we] of view.windows(longestViewForm)) {
        search(fold(view.text.slice(ws, we)), inViews, (s, e) => found.push(view.original(ws + s, ws + e)));
      }
    }
    found.sort((a, b) => a[0] - b[0]);
    const merged: [number, number][] = [];
    for (const [s, e] of found) {
      const last = merged[merged.length - 1];
      if (last && s <= last[1]) last[1] = Math.max(last[1], e);
      else merged.push([s, e]);
    }
    return merged;
  }

  function search(folded: string, list: string[], add: (start: number, end: number) => void): void {
    for (const form of list) {
      for (let i = folded.indexOf(form); i !== -1; i = folded.indexOf(form, i + 1)) add(i, i + form.length);
    }
  }

  function replace(text: string, found: [number, number][], end: number): string {
    let out = '';
    let at = 0;
    for (const [s, e] of found) {
      if (s >= end) break;
      out += text.slice(at, s) + REDACTED;
      at = e;
    }
    return out + text.slice(at, Math.max(at, end));
  }

  return {
    longestFormBytes,
    redact(text) {
      return text
        .split(REDACTED)
        .map((piece) => replace(piece, spans(piece), piece.length))
        .join(REDACTED);
    },
    redactPrefix(text, limit) {
      const found = spans(text);
      let end = Math.min(limit, text.length);
      for (const [s, e] of found) if (s < end) end = Math.max(end, e);
      return replace(text, found, end);
    },
  };
}
