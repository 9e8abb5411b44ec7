/**
 * How the console writes times, durations, counts and progress. Times are shown in the viewer's
 * zone, with the UTC instant for the hover title.
 */

/**
 * The one locale and clock of every time the console writes (tables, facts, the charts' axes), so
 * the same instant reads the same everywhere: day month year, 24-hour clock.
 */
const TIME_LOCALE = 'en-GB';
const CLOCK = { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' } as const;

/** e.g. "2 Dec 2026, 14:05:09" in `timeZone` (default: the viewer's). */
export function formatLocal(iso: string | null | undefined, timeZone?: string): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  return new Intl.DateTimeFormat(TIME_LOCALE, {
    day: 'numeric',
    month: 'short',
    year: 'numeric',
    ...CLOCK,
    second: '2-digit',
    ...(timeZone ? { timeZone } : {}),
  }).format(d);
}

/** The time of day alone, as formatLocal writes it: "14:05" (a chart's axis). */
export function formatClock(iso: string | null | undefined, timeZone?: string): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  return new Intl.DateTimeFormat(TIME_LOCALE, { ...CLOCK, ...(timeZone ? { timeZone } : {}) }).format(d);
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
