/**
 * The Executions screen's search box and its URL: `status:failed endpoint:billing error:"timeout"`
 * and free text (a job's name or idempotency key, from its start). Status and endpoint move to
 * their own controls (the `status` and `endpoint` parameters); the error text and the free text
 * stay in the box, kept in the URL as `error` and `q`. Pure; unit-tested.
 */
import { parseSearch } from './search-syntax.ts';

export const EXECUTION_STATUSES = ['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'] as const;

const KEYS = ['status', 'endpoint', 'error'];

/** The text a search box shows for the URL's `error` and `q`; reading it back gives them again. */
export function executionSearchText(search: URLSearchParams): string {
  const error = search.get('error');
  // The syntax has no escape for a quote: one in the error text ends the value, so it is left out.
  const term = error ? `error:${/[\s"]/.test(error) ? `"${error.replace(/"/g, '')}"` : error}` : '';
  return [term, search.get('q') ?? ''].filter(Boolean).join(' ');
}

/**
 * The URL parameters a submitted search sets. An endpoint is named by its name, or by a part of
 * it that only one endpoint's name holds (`endpoint:billing` for `billing.send-invoice`), in any
 * case. A status or endpoint that names none stays in the free text, so nothing typed is dropped.
 */
export function executionSearchParams(input: string, endpoints: readonly { id: string; name: string }[]): Record<string, string | null> {
  const { terms, text } = parseSearch(input, KEYS);
  const left = [text];
  const patch: Record<string, string | null> = {};
  const status = terms.status?.toUpperCase();
  if (status && (EXECUTION_STATUSES as readonly string[]).includes(status)) patch.status = status;
  else if (terms.status) left.push(`status:${terms.status}`);
  if (terms.endpoint) {
    const id = endpointNamed(terms.endpoint, endpoints);
    if (id) patch.endpoint = id;
    else left.push(`endpoint:${terms.endpoint}`);
  }
  patch.error = terms.error ?? null;
  patch.q = left.filter(Boolean).join(' ') || null;
  return patch;
}

function endpointNamed(name: string, endpoints: readonly { id: string; name: string }[]): string | undefined {
  const wanted = name.toLowerCase();
  const exact = endpoints.find((e) => e.name.toLowerCase() === wanted);
  if (exact) return exact.id;
  const holding = endpoints.filter((e) => e.name.toLowerCase().includes(wanted));
  return holding.length === 1 ? holding[0]!.id : undefined;
}
