/**
 * Views of a text with one layer of escaping undone, each character of a view knowing the span of
 * the text it came from: what redaction (./redaction.ts) searches besides the text itself, for the
 * encodings that write every character of a secret differently and so cannot be listed as forms
 * (an entity may be decimal or hex, padded or not, `;` or not, per character).
 *
 * One view per family, each undoing only its own escapes (`%41` stays as it is in the HTML view),
 * so that a text that also holds another family's escape sequence literally reads right:
 *  - html: numeric character references (`&#115;`, `&#x65;`, `&#X00065`), and `&amp;` `&lt;`
 *    `&gt;` `&quot;` `&apos;`;
 *  - backslash: `\uXXXX` (a surrogate pair as two), `\u{X...}`, `\xXX`, and JSON's `\"` `\\` `\/`
 *    `\b` `\f` `\n` `\r` `\t`;
 *  - percent: `%XX` runs, read as UTF-8 bytes;
 *  - quoted-printable: `=XX` runs, read as UTF-8 bytes, and soft line breaks (`=` CRLF) dropped;
 *  - unwrapped: the text (and each view above) without its line breaks and the blanks that begin
 *    a continued line, when a line of base64 or hex ends at one: an encoding wrapped at 64 or 76
 *    columns (PEM, MIME), a folded header.
 * A byte sequence that is not UTF-8 is left as it was written. Each view is built only when the
 * text holds something it undoes, and costs one pass.
 */

/**
 * A decoded view. It stores where it differs from its parent, not a position per character:
 * building one is a pass of its pattern over the parent, and positions are worked out only for
 * the rare match.
 */
export class View {
  constructor(
    /** The text with one layer undone. */
    readonly text: string,
    private readonly parent: View | undefined,
    /** Sorted by `at`: view units [at, at + length) stand for parent units [from, to). Between edits the view copies the parent. */
    private readonly edits: { at: number; length: number; from: number; to: number }[],
  ) {}

  /** The parent units [start, end) that view unit `i` stands for. */
  private inParent(i: number): [number, number] {
    let lo = 0;
    let hi = this.edits.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.edits[mid]!.at <= i) lo = mid + 1;
      else hi = mid - 1;
    }
    const e = this.edits[hi];
    if (!e) return [i, i + 1];
    if (i < e.at + e.length) return [e.from, e.to];
    const p = i - (e.at + e.length) + e.to;
    return [p, p + 1];
  }

  /**
   * The parts of the view within `reach` units of a place it differs from its parent, merged:
   * elsewhere it is its parent's text, so a form found there is found in the parent already.
   */
  windows(reach: number): [number, number][] {
    const out: [number, number][] = [];
    for (const e of this.edits) {
      const start = Math.max(0, e.at - reach);
      const end = Math.min(this.text.length, e.at + e.length + reach);
      const last = out[out.length - 1];
      if (last && start <= last[1]) last[1] = Math.max(last[1], end);
      else out.push([start, end]);
    }
    return out;
  }

  /** The span of the original text that view units [start, end) stand for. */
  original(start: number, end: number): [number, number] {
    const s = this.inParent(start)[0];
    const e = this.inParent(end - 1)[1];
    return this.parent ? this.parent.original(s, e) : [s, e];
  }
}

/** A view under construction over `parent` (a view, or the original text itself). */
class Builder {
  private readonly parts: string[] = [];
  private readonly edits: { at: number; length: number; from: number; to: number }[] = [];
  private length = 0;
  constructor(private readonly parent: View | string) {}

  /** Copies the parent's units [start, end) as they are. */
  copy(start: number, end: number): void {
    if (end <= start) return;
    this.parts.push(textOf(this.parent).slice(start, end));
    this.length += end - start;
  }

  /** Writes `chars` (none: drops them), decoded from the parent's units [start, end). */
  decoded(chars: string, start: number, end: number): void {
    this.parts.push(chars);
    this.edits.push({ at: this.length, length: chars.length, from: start, to: end });
    this.length += chars.length;
  }

  view(): View {
    return new View(this.parts.join(''), typeof this.parent === 'string' ? undefined : this.parent, this.edits);
  }
}

const textOf = (v: View | string) => (typeof v === 'string' ? v : v.text);

/**
 * The view of `parent` with each match of `pattern` (global) replaced by what `decode` makes of
 * it; undefined when nothing matched, or nothing changed.
 */
function rewrite(parent: View | string, pattern: RegExp, decode: (m: RegExpExecArray, out: Builder) => boolean): View | undefined {
  const text = textOf(parent);
  const out = new Builder(parent);
  let at = 0;
  let changed = false;
  pattern.lastIndex = 0;
  for (let m = pattern.exec(text); m; m = pattern.exec(text)) {
    out.copy(at, m.index);
    if (decode(m, out)) changed = true;
    else out.copy(m.index, m.index + m[0].length);
    at = m.index + m[0].length;
  }
  if (!changed) return undefined;
  out.copy(at, text.length);
  return out.view();
}

/** A code point as text, or undefined for a number that is none. */
function codePoint(n: number): string | undefined {
  return Number.isInteger(n) && n >= 0 && n <= 0x10ffff ? String.fromCodePoint(n) : undefined;
}

/** Bytes written as escapes (`byte` -1: a soft line break), with where each escape sits in the parent. */
interface EscapedByte {
  byte: number;
  start: number;
  end: number;
}

/** Length of the UTF-8 sequence a lead byte opens (0: not a lead byte). */
const utf8Length = (b: number) => (b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0);

/**
 * Writes a run of escaped bytes as the UTF-8 text they encode; a byte that opens no sequence stays
 * as written. A soft line break is dropped; inside a character's bytes, that character's span covers it.
 */
function utf8Run(units: EscapedByte[], out: Builder): void {
  for (let i = 0; i < units.length;) {
    const lead = units[i]!;
    if (lead.byte < 0) {
      out.decoded('', lead.start, lead.end);
      i++;
      continue;
    }
    const n = utf8Length(lead.byte);
    const rest: EscapedByte[] = [];
    let j = i + 1;
    for (; rest.length < n - 1 && j < units.length; j++) if (units[j]!.byte >= 0) rest.push(units[j]!);
    if (n === 0 || rest.length !== n - 1 || rest.some((b) => (b.byte & 0xc0) !== 0x80)) {
      out.copy(lead.start, lead.end);
      i++;
      continue;
    }
    let cp = n === 1 ? lead.byte : lead.byte & (0xff >> (n + 1));
    for (const b of rest) cp = (cp << 6) | (b.byte & 0x3f);
    out.decoded(String.fromCodePoint(cp), lead.start, (rest.at(-1) ?? lead).end);
    i = n === 1 ? i + 1 : j;
  }
}

const HTML_NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
const HTML = /&(?:#(?:[xX]([0-9a-fA-F]{1,8})|([0-9]{1,10}));?|(amp|lt|gt|quot|apos);)/gi;
const BACKSLASH = /\\(?:u([0-9a-fA-F]{4})|u\{([0-9a-fA-F]{1,6})\}|x([0-9a-fA-F]{2})|(["'\\/bfnrt]))/g;
const JSON_SINGLE: Record<string, string> = { '"': '"', "'": "'", '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
const PERCENT_RUN = /(?:%[0-9a-fA-F]{2})+/g;
const QP_RUN = /(?:=[0-9a-fA-F]{2}|=\r?\n)+/g;
const QP_UNIT = /=([0-9a-fA-F]{2})|=\r?\n/g;
const LINE_BREAK = /\r?\n[ \t]*|\r[ \t]*/g;

// Each with the character its escapes start with: text without it makes no view, at the cost of one indexOf.
const DECODERS: [trigger: string, view: (parent: View | string) => View | undefined][] = [
  [
    '&',
    (p) =>
      rewrite(p, HTML, (m, out) => {
        const chars = m[3] ? HTML_NAMED[m[3].toLowerCase()] : codePoint(m[1] ? parseInt(m[1], 16) : Number(m[2]));
        if (chars === undefined) return false;
        out.decoded(chars, m.index, m.index + m[0].length);
        return true;
      }),
  ],
  [
    '\\',
    (p) =>
      rewrite(p, BACKSLASH, (m, out) => {
        const hex = m[1] ?? m[2] ?? m[3];
        const chars =
          hex !== undefined ? (m[1] ? String.fromCharCode(parseInt(hex, 16)) : codePoint(parseInt(hex, 16))) : JSON_SINGLE[m[4]!];
        if (chars === undefined) return false;
        out.decoded(chars, m.index, m.index + m[0].length);
        return true;
      }),
  ],
  [
    '%',
    (p) =>
      rewrite(p, PERCENT_RUN, (m, out) => {
        const bytes = Array.from({ length: m[0].length / 3 }, (_, k) => ({
          byte: parseInt(m[0].slice(3 * k + 1, 3 * k + 3), 16),
          start: m.index + 3 * k,
          end: m.index + 3 * k + 3,
        }));
        utf8Run(bytes, out);
        return true;
      }),
  ],
  [
    '=',
    (p) =>
      rewrite(p, QP_RUN, (m, out) => {
        // A soft line break is in the run: the bytes either side of one are read together.
        const units = [...m[0].matchAll(QP_UNIT)].map((u) => ({
          byte: u[1] ? parseInt(u[1], 16) : -1,
          start: m.index + u.index,
          end: m.index + u.index + u[0].length,
        }));
        utf8Run(units, out);
        return true;
      }),
  ],
];

/**
 * A line break that ends a line of base64 or hex (at least 16 of its characters): where a wrapped
 * encoding is cut. Line breaks in other text (pretty-printed JSON, HTML) make no view.
 */
function wrapsAnEncoding(text: string): boolean {
  const encoded = (i: number) => /[A-Za-z0-9+/=_-]/.test(text[i] ?? '');
  // A scan from each line break, not one regular expression: that one retried 16 characters at
  // every position of the text (most of the redactor's time on a 4 KiB excerpt).
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) {
    const before = i - (text[i - 1] === '\r' ? 2 : 1);
    let run = 0;
    while (run < 16 && encoded(before - run)) run++;
    let after = i + 1;
    while (text[after] === ' ' || text[after] === '\t') after++;
    if (run === 16 && encoded(after)) return true;
  }
  return false;
}

/** The parent without its line breaks (and the blanks that begin a continued line), when it holds a wrapped encoding. */
function unwrapped(parent: View | string): View | undefined {
  if (!wrapsAnEncoding(textOf(parent))) return undefined;
  return rewrite(parent, LINE_BREAK, (m, out) => (out.decoded('', m.index, m.index + m[0].length), true));
}

/** Every view of `text` (see the module comment); none for text with nothing to undo. */
export function decodedViews(text: string): View[] {
  const views: View[] = [];
  for (const [trigger, decode] of DECODERS) {
    if (!text.includes(trigger)) continue;
    const view = decode(text);
    if (view) views.push(view);
  }
  for (const parent of [text, ...views]) {
    const view = unwrapped(parent);
    if (view) views.push(view);
  }
  return views;
}
