/**
 * Live patches over a list that is also reloaded: an event changes a row on screen at once, and a
 * reload brings the rows as the database had them when the reload was asked. A reload asked
 * before an event arrived may answer after it, with the row as it was before the event; dropping
 * every patch on each reload would then show that older state until the next reload (a row that
 * flickers back, or a change that never shows when the next event restores what the stale answer
 * showed). So a patch is dropped only by a reload asked after it arrived, which has seen it.
 */
export interface Patch<T> {
  value: T;
  /** When it arrived (performance.now()). */
  at: number;
}

export type Patches<T> = Readonly<Record<string, Patch<T>>>;

/** `patches` with `id` set to `value`, arrived at `at`. */
export function withPatch<T>(patches: Patches<T>, id: string, value: T, at: number): Patches<T> {
  return { ...patches, [id]: { value, at } };
}

/** The patches a reload asked at `requestedAt` has not seen (those that arrived since). */
export function unseenBy<T>(patches: Patches<T>, requestedAt: number): Patches<T> {
  const kept = Object.entries(patches).filter(([, p]) => p.at >= requestedAt);
  return kept.length === Object.keys(patches).length ? patches : Object.fromEntries(kept);
}

/** The value on screen: the patch, if any, else what the list holds. */
export function patched<T>(patches: Patches<T>, id: string, listed: T): T {
  return patches[id]?.value ?? listed;
}
