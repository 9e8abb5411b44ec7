/**
 * A small history router under /console: paths like /console/jobs/<id>. Links are real anchors,
 * so they work with the keyboard, middle-click and the browser's back button.
 */
import { useEffect, useState } from 'react';

export const BASE = '/console';

/** The route of a location path: "/console/jobs/abc" -> ["jobs", "abc"]. */
export function routeOf(pathname: string): string[] {
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  return rest.split('/').filter(Boolean).map(decodeURIComponent);
}

export function href(...parts: string[]): string {
  return `${BASE}/${parts.map(encodeURIComponent).join('/')}`;
}

const listeners = new Set<() => void>();

export function navigate(to: string): void {
  if (to === location.pathname + location.search) return;
  history.pushState(null, '', to);
  for (const l of listeners) l();
}

export function useLocation(): { route: string[]; search: URLSearchParams } {
  const [, setTick] = useState(0);
  useEffect(() => {
    const update = () => setTick((n) => n + 1);
    listeners.add(update);
    addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      removeEventListener('popstate', update);
    };
  }, []);
  return { route: routeOf(location.pathname), search: new URLSearchParams(location.search) };
}

/** Follows an in-app link without reloading (plain clicks only; modified clicks open as usual). */
export function onLinkClick(event: {
  button: number;
  metaKey: boolean;
  ctrlKey: boolean;
  shiftKey: boolean;
  altKey: boolean;
  preventDefault(): void;
  currentTarget: { getAttribute(n: string): string | null };
}): void {
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const to = event.currentTarget.getAttribute('href');
  if (!to || !to.startsWith(BASE)) return;
  event.preventDefault();
  navigate(to);
}
