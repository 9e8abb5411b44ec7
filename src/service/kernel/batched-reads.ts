/**
 * Point reads asked together, answered by one query: the calls for one workspace made in the same
 * turn of the event loop (and the promise jobs it runs) are read with one `id = any(...)` query.
 *
 * A GraphQL list resolves each row's fields at once (an execution's `job`, its `viewerCan`, a job's
 * `lastExecution`), so a page of N rows asked N point reads, three per row for `viewerCan`: a
 * page's cost grew with its size. Nothing is kept past the batch: each call reads what is committed
 * when its batch runs, as its own query did. In the caller's transaction (ServiceContext.outer)
 * reads are not held back: a caller's statements must not run between our call and its read.
 */
import type { Executor } from '../../db/repositories/scope.js';
import type { Actor } from './actor.js';

/** One read: by workspace and key, undefined when there is no such row. */
export type BatchedRead<V> = (workspaceId: string, key: string) => Promise<V | undefined>;

interface Pending<V> {
  keys: Map<string, { resolve(value: V | undefined): void; reject(error: unknown): void }[]>;
}

/**
 * `fetch` reads many keys of one workspace at once (a key it leaves out reads as undefined). With
 * `batch` false each call is a query of its own (the caller's transaction).
 */
export function batchedRead<V>(fetch: (workspaceId: string, keys: string[]) => Promise<Map<string, V>>, batch: boolean): BatchedRead<V> {
  if (!batch) return async (workspaceId, key) => (await fetch(workspaceId, [key])).get(key);
  const pending = new Map<string, Pending<V>>();
  const run = async (workspaceId: string, batched: Pending<V>) => {
    const keys = [...batched.keys.keys()];
    try {
      const found = await fetch(workspaceId, keys);
      for (const [key, waiters] of batched.keys) for (const w of waiters) w.resolve(found.get(key));
    } catch (error) {
      for (const waiters of batched.keys.values()) for (const w of waiters) w.reject(error);
    }
  };
  return (workspaceId, key) =>
    new Promise<V | undefined>((resolve, reject) => {
      let batched = pending.get(workspaceId);
      if (!batched) {
        pending.set(workspaceId, (batched = { keys: new Map() }));
        const mine = batched;
        // After the promise jobs queued now (a list's other rows resolving their fields), as
        // DataLoader does: a row whose read follows another read of its own joins the next batch.
        void Promise.resolve().then(() =>
          process.nextTick(() => {
            pending.delete(workspaceId);
            void run(workspaceId, mine);
          }),
        );
      }
      const waiters = batched.keys.get(key);
      if (waiters) waiters.push({ resolve, reject });
      else batched.keys.set(key, [{ resolve, reject }]);
    });
}

/** Rows by their id, as `fetch` answers. */
export const byId = <R extends { id: string }>(rows: readonly R[]): Map<string, R> => new Map(rows.map((r) => [r.id, r]));

/**
 * A key of two parts, for reads keyed by a pair: the first part must hold no space (an id); the
 * second may hold anything. `splitPairKey` gives the parts back.
 */
export const pairKey = (first: string, second: string): string => `${first} ${second}`;
export const splitPairKey = (key: string): [string, string] => {
  const at = key.indexOf(' ');
  return [key.slice(0, at), key.slice(at + 1)];
};

/** The first page of one parent's nested connection, read with its siblings' (batchedFirstPages). */
export interface FirstPage<R> {
  /** Up to `size + 1` rows, in the list's order (the extra one says a next page exists). */
  rows: Promise<R[]>;
  /** How many rows the parent's list holds, counting at most the count limit; absent for a list without a count. */
  count?: () => Promise<number>;
}

/** A group's read failed: only the parents of that group see its error. */
class GroupFailed {
  constructor(readonly error: unknown) {}
}

/**
 * The first pages of a nested connection (a page of jobs, each with `executions(first: 5)`), read
 * for every parent of the page at once: one statement for the rows and, when asked, one for the
 * counts, instead of two list queries per parent. Parents asking with other `args` (filters, page
 * size) are read apart, each group in one statement; a group whose statement fails fails its own
 * parents only. `rows(ws, parentIds, args, limit)` answers the first `limit` rows of each parent
 * in the list's order; `parentOf` says whose a row is; `count`, for a list that has one, how many
 * rows each parent's list holds. Parent ids are uuids (the caller answers others itself), and
 * read in lower case, as the database gives them back.
 */
export function batchedFirstPages<A, R>(
  rows: (workspaceId: string, parentIds: string[], args: A, limit: number) => Promise<R[]>,
  parentOf: (row: R) => string,
  count: ((workspaceId: string, parentIds: string[], args: A) => Promise<Map<string, number>>) | undefined,
  batch: boolean,
): (workspaceId: string, parentId: string, args: A, size: number) => FirstPage<R> {
  // Keyed by parent and by what else the answer depends on (JSON, after the parent's id and a space).
  const grouped = <V>(read: (ws: string, parentIds: string[], argsKey: string) => Promise<Map<string, V>>) => {
    const batched = batchedRead<V | GroupFailed>(async (ws, keys) => {
      const groups = new Map<string, string[]>();
      for (const key of keys) {
        const [parentId, argsKey] = splitPairKey(key);
        const group = groups.get(argsKey);
        if (group) group.push(parentId);
        else groups.set(argsKey, [parentId]);
      }
      const found = new Map<string, V | GroupFailed>();
      await Promise.all(
        [...groups].map(async ([argsKey, parentIds]) => {
          try {
            for (const [parentId, value] of await read(ws, parentIds, argsKey)) found.set(pairKey(parentId, argsKey), value);
          } catch (error) {
            for (const parentId of parentIds) found.set(pairKey(parentId, argsKey), new GroupFailed(error));
          }
        }),
      );
      return found;
    }, batch);
    return async (ws: string, parentId: string, argsKey: string): Promise<V | undefined> => {
      const value = await batched(ws, pairKey(parentId.toLowerCase(), argsKey));
      if (value instanceof GroupFailed) throw value.error;
      return value;
    };
  };
  const pages = grouped(async (ws, parentIds, argsKey) => {
    const { args, size } = JSON.parse(argsKey) as { args: A; size: number };
    const byParent = new Map<string, R[]>();
    for (const row of await rows(ws, parentIds, args, size + 1)) {
      const mine = byParent.get(parentOf(row));
      if (mine) mine.push(row);
      else byParent.set(parentOf(row), [row]);
    }
    return byParent;
  });
  const counts = count && grouped((ws, parentIds, argsKey) => count(ws, parentIds, (JSON.parse(argsKey) as { args: A }).args));
  return (workspaceId, parentId, args, size) => ({
    rows: pages(workspaceId, parentId, JSON.stringify({ args, size })).then((found) => found ?? []),
    ...(counts ? { count: () => counts(workspaceId, parentId, JSON.stringify({ args })).then((n) => n ?? 0) } : {}),
  });
}

/**
 * One `make(from)` for each database `reader` sends an actor's reads to (ServiceContext.reader:
 * the primary, or the replica for an actor that reads from it), made when first asked: reads
 * batched together go to one database.
 */
export function perReader<T>(reader: (actor: Actor) => Executor, make: (from: Executor) => T): (actor: Actor) => T {
  const made = new Map<Executor, T>();
  return (actor) => {
    const from = reader(actor);
    let value = made.get(from);
    if (value === undefined) made.set(from, (value = make(from)));
    return value;
  };
}
