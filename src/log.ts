/**
 * The one logging module: a leveled logger over pino, one line per message.
 *
 *  - `json`: pino's JSON lines (`{"level":"info","time":"…","msg":"…",…fields}`), for log
 *    collectors. Chosen when stderr is not a terminal or NODE_ENV=production.
 *  - `pretty`: `2026-01-01T00:00:00.000Z info  message key=value`, for a person at a terminal.
 *    A few lines of our own rather than pino-pretty: that is a dozen more packages and a worker
 *    thread for what is here one JSON.parse and a join per line.
 *  - `JOBGATE_LOG_FORMAT=json|pretty` overrides the choice.
 *
 * `child(fields)` gives a logger whose every line carries those fields (a GraphQL request's
 * `requestId`; an attempt's `executionId`, `jobId`, `attempt`). Fields are for ids and counts:
 * a secret never goes into a message or a field (Invariant 9).
 */
import { performance } from 'node:perf_hooks';
import pino from 'pino';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
export type LogFormat = 'json' | 'pretty';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /**
   * A logger whose every line also carries `fields`. Optional, so a logger an application hands
   * the library (four methods) still fits: `withFields` covers one without it.
   */
  child?(fields: LogFields): Logger;
}

/** `log` with `fields` on every line: its own child, or (a logger without one) the fields passed along. */
export function withFields(log: Logger, fields: LogFields): Logger {
  if (log.child) return log.child(fields);
  const at = (lvl: 'debug' | 'info' | 'warn' | 'error') => (msg: string, more?: LogFields) => log[lvl](msg, { ...fields, ...more });
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (more) => withFields(log, { ...fields, ...more }),
  };
}

/** The format for a process: the override, else JSON unless a person is watching stderr. */
export function logFormatFor(env: Record<string, string | undefined> = process.env, tty = process.stderr.isTTY === true): LogFormat {
  const asked = env.JOBGATE_LOG_FORMAT;
  if (asked === 'json' || asked === 'pretty') return asked;
  return tty && env.NODE_ENV !== 'production' ? 'pretty' : 'json';
}

const CORE = new Set(['level', 'time', 'msg']);

/** One JSON line as a person reads it (the format before JSON lines, with fields appended). */
export function prettyLine(line: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.replace(/\n$/, '');
  }
  const fields = Object.entries(o)
    .filter(([k]) => !CORE.has(k))
    .map(([k, v]) => ` ${k}=${typeof v === 'string' && /^[^\s"=]*$/.test(v) ? v : JSON.stringify(v)}`)
    .join('');
  return `${String(o.time)} ${String(o.level).padEnd(5)} ${String(o.msg ?? '')}${fields}`;
}

function wrap(p: pino.Logger): Logger {
  const at = (lvl: 'debug' | 'info' | 'warn' | 'error') => (msg: string, fields?: LogFields) => {
    if (fields) p[lvl](fields, msg);
    else p[lvl](msg);
  };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), child: (fields) => lazyChild(p, fields) };
}

/**
 * `p.child(fields)`, made on the first line written at an enabled level. Every GraphQL request
 * and every attempt gets a child, and most write nothing: pino serialises a child's fields when
 * it is made, which cost a request more than its own resolver.
 */
function lazyChild(p: pino.Logger, fields: LogFields): Logger {
  let made: Logger | undefined;
  const at = (lvl: 'debug' | 'info' | 'warn' | 'error') => (msg: string, more?: LogFields) => {
    if (p.isLevelEnabled(lvl)) (made ??= wrap(p.child(fields)))[lvl](msg, more);
  };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (more) => lazyChild(p, { ...fields, ...more }),
  };
}

/**
 * A logger at `level`. Lines go to `write` (one string per line, no newline), or to stderr. The
 * format is `format`, else pretty for a `write` sink (tests, embedders reading lines), else
 * `logFormatFor()`.
 */
export function createLogger(level: LogLevel = 'info', write?: (line: string) => void, format?: LogFormat): Logger {
  const fmt = format ?? (write ? 'pretty' : logFormatFor());
  const out = write ?? ((l: string) => void process.stderr.write(l + '\n'));
  const destination = { write: (s: string) => out(fmt === 'pretty' ? prettyLine(s) : s.replace(/\n$/, '')) };
  return wrap(
    pino(
      {
        level,
        base: undefined,
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label) => ({ level: label }) },
      },
      destination,
    ),
  );
}

export const silentLogger: Logger = createLogger('silent');

/** `log`, at most once per `ms`; the next line says how many it left out meanwhile. */
export function atMostEvery(ms: number, log: (msg: string) => void): (msg: string) => void {
  let last = -Infinity;
  let left = 0;
  return (msg) => {
    const now = performance.now();
    if (now - last < ms) {
      left++;
      return;
    }
    last = now;
    log(left > 0 ? `${msg} (and ${left} more since the last such line)` : msg);
    left = 0;
  };
}
