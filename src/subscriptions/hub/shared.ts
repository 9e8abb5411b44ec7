/** Small pieces the parts of the live hub (./hub.ts) share. */

/** Whether the hub has stopped; every part reads the same one, set once by `stop`. */
export interface Lifetime {
  stopped: boolean;
}

/** Adds `value` to the set kept under `key`, creating the set. */
export function addTo<K, V>(map: Map<K, Set<V>>, key: K, value: V): void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(value);
}

/** Removes `value` from the set kept under `key`, and the set once it is empty. */
export function removeFrom<K, V>(map: Map<K, Set<V>>, key: K, value: V): void {
  const set = map.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) map.delete(key);
}

/** How many values all the sets of `map` hold, or those `keep` keeps. */
export function countIn<K, V>(map: Map<K, Set<V>>, keep: (value: V) => boolean = () => true): number {
  let n = 0;
  for (const set of map.values()) for (const value of set) if (keep(value)) n++;
  return n;
}
