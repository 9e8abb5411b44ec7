/**
 * The one reading of an `Authorization: Bearer <token>` header, for every route that takes one
 * (GraphQL over HTTP and WebSocket, /metrics, /jobs/run-due). The scheme is case-insensitive
 * (RFC 7235); the token is what follows it, without surrounding blanks.
 */
export function bearerToken(header: string | null | undefined): string | undefined {
  const match = /^Bearer[ \t]+(.+)$/i.exec(header ?? '');
  const token = match?.[1]!.trim();
  return token ? token : undefined;
}
