/** The `ticket` query parameter of a request (a subscription ticket, for EventSource), or null. */
export function ticketOf(request: Request): string | null {
  const q = request.url.indexOf('?');
  return q < 0 ? null : new URLSearchParams(request.url.slice(q + 1)).get('ticket');
}
