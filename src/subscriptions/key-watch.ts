/**
 * What ends a key's live streams when the key lapses (Invariant 10: a revoked key stops
 * everything it had open at once, live streams included). A request is authenticated once, when
 * it starts; a subscription and a WebSocket connection outlive that moment, so this process
 * remembers, per key, what each one has open here, and ends it when the service says the key no
 * longer backs its actor (`service.lapsedActors`: revoked, or another role now).
 *
 * How a replica learns of it:
 *  - at once: the revoking transaction sends a NOTIFY hint naming the key
 *    (src/db/repositories/api-keys.ts), which the hub's one listening connection hears on every
 *    gateway replica; the key is then checked against its row (a hint is never taken as proof);
 *  - as a backstop, every `recheckMs` while anything is watched, and whenever the listener
 *    (re)connects: a NOTIFY is lost while a listener is down, never arrives through a
 *    transaction-mode pooler, and a role can be changed by hand in the database;
 *  - right after each watch starts: a revocation that committed between the key's check and
 *    the watch would have been heard by nobody. Only the new watch's actor is checked then, not
 *    every watch of its key: a server holding thousands of streams under one key would otherwise
 *    check all of them again for each stream that opens (quadratic in a reconnection storm).
 * Checks are batched: one query for all the keys and new watches due at that moment, each actor
 * asked about once however many of its streams are watched.
 */
import type { Logger } from '../log.js';
import { UnauthenticatedError } from '../service/access/access.js';
import type { Actor } from '../service/kernel/actor.js';

export interface KeyWatchOptions {
  /** The service's rule: of these actors, those their key no longer backs. */
  lapsedActors(actors: readonly Actor[]): Promise<Actor[]>;
  log: Logger;
  /** How often everything watched is checked again, notifications or not. */
  recheckMs: number;
}

interface Watcher {
  actor: Actor;
  end(error: UnauthenticatedError): void;
}

export class KeyWatch {
  /** By key id. */
  private readonly watched = new Map<string, Set<Watcher>>();
  private readonly due = new Set<string>();
  /** Watches started since the last check, whose own actor is checked next. */
  private readonly fresh = new Set<Watcher>();
  private checking: Promise<void> | undefined;
  /** Whether the last check could not ask the database: an outage is said once, and its end once. */
  private failing = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: KeyWatchOptions) {}

  /**
   * Calls `end` once, with UNAUTHENTICATED, if the actor's key lapses while watched. Returns the
   * function that stops watching. An actor without a key (jobgate itself, the library) is not
   * watched: it has no key to revoke.
   */
  watch(actor: Actor, end: (error: UnauthenticatedError) => void): () => void {
    const keyId = actor.kind === 'user' ? actor.keyId : undefined;
    if (!keyId) return () => {};
    const watcher: Watcher = { actor, end };
    let set = this.watched.get(keyId);
    if (!set) this.watched.set(keyId, (set = new Set()));
    set.add(watcher);
    this.timer ??= setInterval(() => this.hint(undefined), this.options.recheckMs).unref();
    this.fresh.add(watcher);
    void this.check();
    return () => this.unwatch(keyId, watcher);
  }

  /** A key may have lapsed (undefined: any key may have; a notification may have been missed). */
  hint(keyId: string | undefined): void {
    if (keyId === undefined) for (const id of this.watched.keys()) this.due.add(id);
    else if (this.watched.has(keyId)) this.due.add(keyId);
    else return;
    void this.check();
  }

  /** Keys watched, for diagnostics and tests. */
  get size(): number {
    return this.watched.size;
  }

  private unwatch(keyId: string, watcher: Watcher) {
    this.fresh.delete(watcher);
    const set = this.watched.get(keyId);
    if (!set?.delete(watcher) || set.size > 0) return;
    this.watched.delete(keyId);
    if (this.watched.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /**
   * Checks the keys due and the new watches, one query for all of them; what comes due meanwhile
   * gets the next.
   */
  private async check(): Promise<void> {
    if (this.checking) return;
    // Hints that arrive in the same tick (a listener's burst, many subscriptions opening) share a query.
    this.checking = new Promise<void>((r) => setImmediate(r)).then(async () => {
      while (this.due.size > 0 || this.fresh.size > 0) {
        const keys = [...this.due];
        this.due.clear();
        const watchers = new Set(keys.flatMap((id) => [...(this.watched.get(id) ?? [])]));
        for (const w of this.fresh) watchers.add(w);
        this.fresh.clear();
        let lapsed: Actor[];
        // A connection and each of its streams watch the same actor: asked about once.
        const actors = [...new Set([...watchers].map((w) => w.actor))];
        try {
          lapsed = await this.options.lapsedActors(actors);
        } catch (error) {
          // The database could not be asked (it went away): the periodic re-check asks again, and
          // says so once for the outage rather than at every check.
          if (!this.failing)
            this.options.log.warn(
              `live: could not check the API keys of ${new Set(actors.map((a) => a.keyId)).size} key(s) with open streams (${(error as Error).message}); checking again every ${this.options.recheckMs} ms until the database answers`,
            );
          this.failing = true;
          return;
        }
        if (this.failing) this.options.log.info('live: checking the API keys of open streams again');
        this.failing = false;
        const gone = new Set(lapsed);
        // A new watch found lapsed whose key was not checked whole this round: its key is, next
        // round, and the watch ends then with the rest of the key's, in the order they began. A
        // connection begins before its streams, so it closes (4403) before a stream's error is
        // sent; ended first, the stream's error reached the client, which then closed the socket
        // itself (1000), and the connection was left open until the next periodic check.
        const whole = new Set(keys);
        for (const watcher of watchers) if (gone.has(watcher.actor) && !whole.has(watcher.actor.keyId!)) this.due.add(watcher.actor.keyId!);
        for (const watcher of watchers) {
          if (!gone.has(watcher.actor) || !whole.has(watcher.actor.keyId!)) continue;
          this.unwatch(watcher.actor.keyId!, watcher);
          watcher.end(
            new UnauthenticatedError(
              'this API key was revoked, or what it grants changed: its live streams have ended; authenticate again',
            ),
          );
        }
      }
    });
    try {
      await this.checking;
    } finally {
      this.checking = undefined;
      if (this.due.size > 0 || this.fresh.size > 0) void this.check();
    }
  }
}
