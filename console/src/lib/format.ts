/**
 * How the console writes times, durations, counts and progress. Times are shown in the viewer's
 * zone and locale, with the UTC instant for the hover title.
 */

/**
 * The viewer's locales, most preferred first: the browser's language list (what the viewer chose,
 * and what the page's `Intl` default follows), or `undefined` (the runtime's default) outside a
 * browser. Read on each call: a test or a settings change may switch the language.
 */
export function viewerLocales(): readonly string[] | undefined {
  const languages = typeof navigator === 'undefined' ? undefined : navigator.languages;
  return languages && languages.length > 0 ? languages : undefined;
}

/**
 * Every time the console writes (tables, facts, the charts' axes) is in the locale's own styles:
 * its medium date and time ("Mar 8, 2026, 2:05:09 PM" in en-US, "8 Mar 2026, 14:05:09" in en-GB,
 * "08.03.2026, 14:05:09" in de-DE), and on an axis its short time ("2:05 PM", "14:05"): the
 * hour cycle is the locale's, the same for both, so an instant reads the same in a table and on
 * a chart. No hour cycle, order or separator is pinned here: pinning one (as en-GB with a
 * 24-hour clock was) reads wrong to everyone whose locale writes times otherwise.
 */
const FULL = { dateStyle: 'medium', timeStyle: 'medium' } as const;
const CLOCK = { timeStyle: 'short' } as const;

/**
 * Formatters cost far more to build than to use, and a table writes a hundred times a render: one
 * per locale, zone and shape.
 */
const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(shape: 'full' | 'clock', timeZone: string | undefined, locales: readonly string[] | undefined): Intl.DateTimeFormat {
  const key = `${shape}|${timeZone ?? ''}|${locales?.join(',') ?? ''}`;
  let f = formatters.get(key);
  if (!f) {
    const options: Intl.DateTimeFormatOptions = shape === 'full' ? FULL : CLOCK;
    f = new Intl.DateTimeFormat(locales as string[] | undefined, timeZone ? { ...options, timeZone } : options);
    formatters.set(key, f);
  }
  return f;
}

function instant(iso: string | null | undefined): Date | null {
  if (!iso) return null;
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? null : d;
}

/** Date and time to the second, in `timeZone` (default: the viewer's) and the viewer's locale. */
export function formatLocal(iso: string | null | undefined, timeZone?: string, locales = viewerLocales()): string {
  const d = instant(iso);
  return d ? formatter('full', timeZone, locales).format(d) : '—';
}

/**
 * The time of day alone, to the minute, as formatLocal writes it: a chart's axis. formatLocal's
 * text without its seconds contains it.
 */
export function formatClock(iso: string | null | undefined, timeZone?: string, locales = viewerLocales()): string {
  const d = instant(iso);
  return d ? formatter('clock', timeZone, locales).format(d) : '—';
}

/** The UTC instant, for hovering: "2026-12-02 14:05:09 UTC". */
export function formatUtc(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** "in 3 min", "12 s ago", relative to `now`. */
export function formatRelative(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return '—';
  const ms = new Date(iso).getTime() - now;
  const text = formatDuration(Math.abs(ms), true);
  if (Math.abs(ms) < 1000) return 'now';
  return ms > 0 ? `in ${text}` : `${text} ago`;
}

/** 850 -> "850 ms", 61_000 -> "1 min 1 s", 7_260_000 -> "2 h 1 min"; `coarse` drops the smaller unit. */
export function formatDuration(ms: number | null | undefined, coarse = false): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return coarse || ms >= 10_000 ? `${s} s` : `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return coarse || s % 60 === 0 ? `${m} min` : `${m} min ${s % 60} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return coarse || m % 60 === 0 ? `${h} h` : `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d`;
}

/** 1234567 -> "1,234,567". */
export function formatCount(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—';
  return new Intl.NumberFormat('en-GB').format(n);
}

export interface ProgressSample {
  /** Milliseconds since the epoch. */
  at: number;
  processed: number;
}

export interface RunProgressView {
  /** 0..1, or null when the total is unknown. */
  fraction: number | null;
  /** "1,200 / 5,000" or "1,200" without a total. */
  label: string;
  /** Items per second over the samples, or null with fewer than two. */
  rate: number | null;
  /** Milliseconds left at that rate, or null when unknown. */
  etaMs: number | null;
}

/**
 * A run's progress as the progress bar shows it: the fraction done, the rate over the recent
 * samples (oldest to newest) and the time left at that rate.
 */
export function runProgress(processed: number, total: number | null | undefined, samples: readonly ProgressSample[]): RunProgressView {
  const hasTotal = typeof total === 'number' && total > 0;
  const fraction = hasTotal ? Math.min(1, Math.max(0, processed / total)) : null;
  let rate: number | null = null;
  const first = samples[0];
  const last = samples[samples.length - 1];
  if (first && last && last.at > first.at && last.processed >= first.processed) {
    rate = ((last.processed - first.processed) * 1000) / (last.at - first.at);
  }
  let etaMs: number | null = null;
  if (hasTotal && rate !== null && rate > 0) etaMs = (Math.max(0, total - processed) / rate) * 1000;
  if (hasTotal && processed >= total) etaMs = 0;
  return { fraction, label: hasTotal ? `${formatCount(processed)} / ${formatCount(total)}` : formatCount(processed), rate, etaMs };
}

/** Keeps the samples of the last `windowMs` (at least the newest two), appending `sample`. */
export function addSample(samples: readonly ProgressSample[], sample: ProgressSample, windowMs = 30_000): ProgressSample[] {
  const last = samples[samples.length - 1];
  if (last && sample.processed < last.processed) return [sample]; // a reset (a new run)
  const kept = [...samples, sample].filter((s, i, all) => s.at >= sample.at - windowMs || i >= all.length - 2);
  return kept;
}

/** A string shortened to `max` characters with an ellipsis. */
export function truncate(text: string | null | undefined, max: number): string {
  if (!text) return '';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * A run's cursor (base64 from the API) for people: pretty JSON when it decodes to JSON, the text
 * when it decodes to printable UTF-8, else the base64 itself (bytes only its handler reads).
 * `decoded` says which; null for no cursor (before the first checkpoint).
 */
export function cursorText(base64: string | null | undefined): { text: string; decoded: 'json' | 'text' | 'base64' } | null {
  if (!base64) return null;
  let text: string;
  try {
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return { text: base64, decoded: 'base64' };
  }
  try {
    return { text: JSON.stringify(JSON.parse(text), null, 2), decoded: 'json' };
  } catch {
    // Control characters other than tabs and line ends: binary, shown as it came.
    return /[\u0000-\u0008\u000e-\u001f\u007f]/.test(text) ? { text: base64, decoded: 'base64' } : { text, decoded: 'text' };
  }
}

/**
 * An id short enough for a table cell or a heading: its last eight hex digits. Not its first:
 * jobs and executions made since migration 000058 have ids that begin with the time they were
 * made (UUID version 7), so the ids of a minute's work all begin alike; they end in random bits.
 */
export function shortId(id: string): string {
  return id.slice(-8);
}
