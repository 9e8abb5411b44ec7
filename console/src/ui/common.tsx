import type { ReactNode } from 'react';
import type { ApiError } from '../lib/api.ts';
import { formatClock, formatLocal, formatUtc } from '../lib/format.ts';
import { onLinkClick } from '../lib/router.ts';
import { pageNumber, type PageStack } from '../lib/paging.ts';
import { PAGE_SIZES, withParams } from '../lib/url-state.ts';

/** A time in the viewer's zone; the UTC instant on hover. */
export function Time({ iso, timeZone }: { iso: string | null | undefined; timeZone?: string }) {
  if (!iso) return <span>—</span>;
  return (
    <time dateTime={iso} title={formatUtc(iso)}>
      {formatLocal(iso, timeZone)}
    </time>
  );
}

/**
 * Tabs that set one URL parameter of a list screen (`param`, '' removes it), keeping the screen's
 * other parameters and going back to the first page; the current tab is marked for screen readers.
 */
export function ParamTabs<V extends string>({
  label,
  path,
  search,
  param,
  tabs,
  current,
}: {
  label: string;
  path: string;
  search: URLSearchParams;
  param: string;
  tabs: readonly { value: V; label: string }[];
  current: V;
}) {
  return (
    <nav className="tabs" aria-label={label}>
      {tabs.map((t) => (
        <Link
          key={t.label}
          to={`${path}?${withParams(search, { [param]: t.value }).toString()}`}
          className={t.value === current ? 'current' : undefined}
        >
          {t.label}
        </Link>
      ))}
    </nav>
  );
}

export function Link({ to, children, className, ariaLabel }: { to: string; children: ReactNode; className?: string; ariaLabel?: string }) {
  return (
    <a
      href={to}
      onClick={onLinkClick}
      className={className}
      aria-current={className === 'current' ? 'page' : undefined}
      aria-label={ariaLabel}
    >
      {children}
    </a>
  );
}

/**
 * An error with its stable code and its message; never a blank screen. A validation failure's
 * issues are listed under it unless the message already says them (the API's message names each
 * field and what is wrong with it: saying it twice says nothing more).
 */
export function ErrorBox({ error, title = 'Something went wrong' }: { error: ApiError | null | undefined; title?: string }) {
  if (!error) return null;
  // Unreachable (the gateway, or its database) is no refusal: say so, whatever the caller's title.
  if (error.code === 'UNAVAILABLE') title = 'Unavailable just now, try again';
  const issues = error.issues.filter((i) => !error.message.includes(`${i.path.join('.') || '(input)'}: ${i.message}`));
  return (
    <div className="error" role="alert">
      <strong>{title}</strong> <code className="code">{error.code}</code> <span>{error.message}</span>
      {issues.length > 0 && (
        <ul>
          {issues.map((i, n) => (
            <li key={n}>
              <code>{i.path.join('.') || '(input)'}</code>: {i.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** What an empty list means, and what to do next. */
export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}

export function Loading() {
  return (
    <p className="muted" aria-live="polite">
      Loading…
    </p>
  );
}

/** A state as a coloured tag; `label` replaces the text (the colour stays that of `value`). */
export function Status({ value, label }: { value: string; label?: string }) {
  return <span className={`status status-${value.toLowerCase()}`}>{label ?? value}</span>;
}

export function ProgressBar({ fraction, label }: { fraction: number | null; label: string }) {
  const percent = fraction === null ? null : Math.round(fraction * 1000) / 10;
  return (
    <div
      className="progress"
      role="progressbar"
      aria-label={label}
      aria-valuemin={0}
      aria-valuemax={100}
      aria-valuenow={percent ?? undefined}
      aria-valuetext={percent === null ? label : `${percent}% (${label})`}
    >
      <div
        className={fraction === null ? 'progress-bar indeterminate' : 'progress-bar'}
        style={{ width: fraction === null ? '100%' : `${percent}%` }}
      />
    </div>
  );
}

/** A list's "Per page" choice (lib/url-state.ts PAGE_SIZES). */
export function PageSize({ value, onChange }: { value: number; onChange(size: number): void }) {
  return (
    <label>
      Per page
      <select value={value} onChange={(e) => onChange(Number(e.target.value))}>
        {PAGE_SIZES.map((n) => (
          <option key={n}>{n}</option>
        ))}
      </select>
    </label>
  );
}

export function Pager({ stack, hasNext, onNext, onPrevious }: { stack: PageStack; hasNext: boolean; onNext(): void; onPrevious(): void }) {
  return (
    <nav className="pager" aria-label="Pages">
      <button type="button" onClick={onPrevious} disabled={stack.previous.length === 0 && stack.after === null}>
        ← Newer
      </button>
      <span>Page {pageNumber(stack)}</span>
      <button type="button" onClick={onNext} disabled={!hasNext}>
        Older →
      </button>
    </nav>
  );
}

export interface Series {
  name: string;
  values: (number | null)[];
  className: string;
}

/**
 * A small line chart over per-minute buckets (`times`: each bucket's ISO instant): one SVG, no library. The time axis is written by
 * formatClock, as the tables write their times, with the UTC instant on hover as a table's.
 */
export function LineChart({ title, series, times, unit }: { title: string; series: Series[]; times: string[]; unit?: string }) {
  const width = 360;
  const height = 120;
  const pad = 24;
  const all = series.flatMap((s) => s.values.filter((v): v is number => v !== null));
  const max = Math.max(1, ...all);
  const n = Math.max(2, times.length);
  const x = (i: number) => pad + (i * (width - pad - 4)) / (n - 1);
  const y = (v: number) => height - pad - (v * (height - pad - 8)) / max;
  const summary = series.map((s) => `${s.name}: total ${s.values.reduce<number>((a, v) => a + (v ?? 0), 0)}`).join('; ');
  return (
    <figure className="chart">
      <figcaption>
        {title}
        <span className="legend">
          {series.map((s) => (
            <span key={s.name} className={`legend-item ${s.className}`}>
              {s.name}
            </span>
          ))}
        </span>
      </figcaption>
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label={`${title}. ${summary}`}>
        <line x1={pad} y1={height - pad} x2={width - 4} y2={height - pad} className="axis" />
        <text x={2} y={12} className="tick">
          {max}
          {unit ?? ''}
        </text>
        <text x={2} y={height - pad} className="tick">
          0
        </text>
        {times.length > 0 && (
          <>
            <AxisTime iso={times[0]!} x={pad} y={height - 6} />
            <AxisTime iso={times[times.length - 1]!} x={width - 4} y={height - 6} end />
          </>
        )}
        {series.map((s) => {
          const points = s.values.map((v, i) => (v === null ? null : `${x(i).toFixed(1)},${y(v).toFixed(1)}`)).filter(Boolean);
          return <polyline key={s.name} points={points.join(' ')} className={`line ${s.className}`} fill="none" />;
        })}
      </svg>
    </figure>
  );
}

/** A time on a chart's axis: the viewer's clock, and the UTC instant for the hover. */
function AxisTime({ iso, x, y, end = false }: { iso: string; x: number; y: number; end?: boolean }) {
  return (
    <g className="axis-time">
      <title>{formatUtc(iso)}</title>
      <text x={x} y={y} className="tick" textAnchor={end ? 'end' : undefined}>
        {formatClock(iso)}
      </text>
    </g>
  );
}
