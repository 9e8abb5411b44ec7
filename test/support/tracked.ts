/**
 * What test/support starts for a test file and the file must close (test databases, workers,
 * gateways): each registers here while it runs, so the check after the file
 * (./leak-check.ts) names what was left running. No imports: a unit test file loads it too.
 */
const open = new Map<object, string>();

/** Notes `thing` as running; `what` names it in the failure if it is never closed. */
export function track(thing: object, what: string): void {
  open.set(thing, what);
}

/** `thing` was closed. */
export function untrack(thing: object): void {
  open.delete(thing);
}

/**
 * What is still running, by name; forgotten once told, so that where files share a module
 * graph (isolate: false) only the file that left it fails.
 */
export function takeStillOpen(): string[] {
  const names = [...open.values()];
  open.clear();
  return names;
}
