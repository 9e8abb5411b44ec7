/**
 * What an interval tick's handler returns, as its outcome is written and logged: the count, the
 * JSON `extra` (made storable and bounded here), and the tick's one structured log line.
 */
import type { Logger } from '../../../log.js';
import type { TickEnding } from '../../../db/statements/interval-ticks.js';
import { storableText } from '../../kernel/inputs.js';

/**
 * What a tick returns: how many things it handled and any JSON `extra` beside it (both shown as the
 * last outcome, and in the tick's log line). A bare number is the count; nothing is an OK with
 * neither. To record an error, throw.
 */
export type IntervalResult = { count?: number | undefined; extra?: unknown } | number | void;

/** The largest `extra` kept, as JSON text; a larger one is kept as `{ truncated: true, bytes }`. */
export const MAX_EXTRA_BYTES = 16_384;

/**
 * A handler's return as an OK outcome: a count (a number, or `{ count }`) and `extra` as JSON text.
 * Postgres jsonb cannot hold a NUL in a string, so NULs become U+FFFD; a value JSON cannot write
 * (a cycle, a BigInt) is kept as `{ unserializable: reason }` rather than failing the tick.
 */
export function okOutcome(r: IntervalResult): { count: number | null; extra: string | null } {
  const rawCount = typeof r === 'number' ? r : r && typeof r === 'object' ? r.count : undefined;
  const count = typeof rawCount === 'number' && Number.isFinite(rawCount) ? Math.max(0, Math.floor(rawCount)) : null;
  const raw = r && typeof r === 'object' ? r.extra : undefined;
  if (raw === undefined) return { count, extra: null };
  let extra: string | undefined;
  try {
    extra = JSON.stringify(raw, storableJson);
  } catch (error) {
    extra = JSON.stringify({ unserializable: storableText(String((error as Error)?.message ?? error)).slice(0, 200) });
  }
  if (extra === undefined) return { count, extra: null };
  const bytes = Buffer.byteLength(extra);
  return { count, extra: bytes > MAX_EXTRA_BYTES ? JSON.stringify({ truncated: true, bytes }) : extra };
}

/** A JSON.stringify replacer that makes strings and keys storable (no NUL, no lone surrogate). */
function storableJson(_key: string, v: unknown): unknown {
  if (typeof v === 'string') return storableText(v);
  // Rebuilt only when a key needs it, so JSON.stringify still finds a cycle in what it was given.
  if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).some((k) => storableText(k) !== k))
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [storableText(k), x]));
  return v;
}

/**
 * A tick's one log line: `{ kind: 'interval', handler, outcome, cause, count, elapsed_ms, extra }`,
 * info for OK, warn otherwise. A timeout is logged when it is recorded (at the deadline); the
 * handler may still be returning, and what it returns then is not recorded (nor logged again).
 */
export function logTick(
  log: Logger,
  workerId: string,
  name: string,
  result: Extract<TickEnding, { status: 'OK' | 'ERROR' | 'TIMEOUT' }> | { status: 'CRASHED'; message: string },
  elapsedMs: number | null,
): void {
  const cause = result.status === 'OK' ? null : result.status === 'ERROR' ? result.cause : result.status;
  const fields = {
    kind: 'interval',
    handler: name,
    outcome: result.status === 'OK' ? 'OK' : 'ERROR',
    cause,
    count: result.status === 'OK' ? result.count : null,
    elapsed_ms: elapsedMs,
    extra: result.status === 'OK' && result.extra ? (JSON.parse(result.extra) as unknown) : null,
  };
  if (result.status === 'OK') log.info(`worker ${workerId}: interval ${name}: tick OK`, fields);
  else if (result.status === 'TIMEOUT')
    log.warn(
      `worker ${workerId}: interval ${name}: tick timed out: ${result.message}; it keeps its slot until its handler returns, or its grace ends`,
      fields,
    );
  else log.warn(`worker ${workerId}: interval ${name}: tick failed (${cause}): ${result.message}`, fields);
}
