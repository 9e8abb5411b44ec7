import type { AlertRowFragment } from '../gql/graphql.ts';

/** FIRING, FIRING (digest) for the notification that reports what the rate limit held back, RESOLVED. */
export function alertKindLabel(alert: Pick<AlertRowFragment, 'kind' | 'detail'>): string {
  const digest = typeof alert.detail === 'object' && alert.detail !== null && (alert.detail as { digest?: unknown }).digest === true;
  return alert.kind === 'FIRING' && digest ? 'FIRING (digest)' : alert.kind;
}
