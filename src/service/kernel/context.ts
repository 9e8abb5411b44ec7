import type { Transaction } from 'kysely';
import type pg from 'pg';
import type { ZodType, z } from 'zod';
import type { Db } from '../../db/pool.js';
import type { Executor } from '../../db/repositories/scope.js';
import { createCursorKeys, type CursorKeys } from './cursors.js';
import { isRetriedConflict } from '../../db/conflicts.js';
import { createTransactionBoundary, databaseNow } from '../../db/transaction.js';
import type { ReadReplica } from '../../db/read-replica.js';
import type { DB } from '../../db/types.js';
import type { Actor } from './actor.js';
import { ConflictError, ValidationError } from './errors.js';
import type { SecretBox } from './secrets.js';
import { createOutboundPolicy, type OutboundPolicy } from '../endpoints/outbound-policy.js';
import type { RetentionSettingsDefaults } from '../retention/windows.js';
import { noopObserver, type Observer } from './observer.js';

/** What every service area is built with. */
export interface ServiceDeps {
  db: Db;
  /**
   * The pg pool under `db`, when the caller has it: the hottest statements (createJob's
   * one-statement path) then run as named statements, planned once per connection.
   */
  pool?: pg.Pool | undefined;
  /** Max attempts when neither the job nor its endpoint sets one. */
  defaultMaxAttempts: number;
  /**
   * The clock. Defaults to the database's `now()` (the transaction's start time): time is the
   * database's. Tests of schedules inject one on purpose.
   */
  clock?: ((ex: Executor) => Promise<Date>) | undefined;
  /** Encrypts signing secrets and secret config values at rest. Without it, storing one is refused. */
  secrets?: SecretBox | undefined;
  /**
   * `db` is the caller's own open transaction (one connection; see db/outer.ts), not a pool:
   * the service then opens no transaction of its own. Each mutation runs inside a SAVEPOINT of
   * the caller's transaction, rolled back to on any refusal, so no statement of ours can abort
   * the caller's work; what we write commits or rolls back with it.
   */
  outerTransaction?: boolean | undefined;
  /**
   * CIDRs outbound HTTP may reach although the outbound policy refuses them
   * (JOBGATE_OUTBOUND_ALLOW): registering an endpoint whose url is an IP literal the policy
   * refuses is refused at once. Give it the list the workers have.
   */
  outboundAllow?: string[] | undefined;
  /**
   * How long an authenticated API key is remembered (../access/authenticate.ts); default
   * KEY_CACHE_TTL_MS, 0 turns remembering off.
   */
  keyCacheMs?: number | undefined;
  /** The installation's retention windows (config); unset ones take jobgate's defaults. */
  retention?: Partial<RetentionSettingsDefaults & { batchSize: number; pauseMs: number }> | undefined;
  /** Where operator actions that end executions are reported (metrics). Default: nowhere. */
  observer?: Observer | undefined;
  /** A read replica for lists, counts and stats of actors that allow it (Actor.reads). */
  replica?: Pick<ReadReplica, 'db' | 'fresh'> | undefined;
}

export interface ServiceContext {
  db: Db;
  /**
   * Where a list, count or stat for `actor` reads: the replica when the actor allows it
   * (Actor.reads) and the replica is within its staleness bound, else `db`.
   */
  reader(actor: Actor): Db;
  /** Reports of what committed (./observer.ts): called only after the transaction that did it. */
  observer: Observer;
  pool: pg.Pool | undefined;
  defaultMaxAttempts: number;
  /** How long an authenticated API key is remembered (ServiceDeps.keyCacheMs), undefined: the default. */
  keyCacheMs: number | undefined;
  now(ex: Executor): Promise<Date>;
  /** Whether `now` is the database's own `now()` (no clock injected), so SQL may use now() for it. */
  databaseClock: boolean;
  /** Seals a secret for storage; throws VALIDATION_FAILED at `path` when no key is configured. */
  seal(plain: string, path: (string | number)[]): string;
  /** Per-workspace opaque cursors for events, findings and audit entries (./cursors.ts). */
  cursors: CursorKeys;
  /** Whether `db` is the caller's open transaction (see ServiceDeps.outerTransaction). */
  outer: boolean;
  /** The outbound address policy (src/service/endpoints/outbound-policy.ts), for checks at the door. */
  outbound: OutboundPolicy;
  /**
   * The service's one transaction boundary: `fn` commits or rolls back as a whole. On the pool,
   * a transaction of its own, tried again whole when Postgres aborts it for a conflict with
   * another transaction (db/transaction.ts); in the caller's transaction, a savepoint, released on
   * success and rolled back to on a throw, so the caller's transaction stays usable after any
   * refusal. A conflict that outlasts the tries is refused with CONFLICT.
   */
  transaction<T>(fn: (trx: Transaction<DB>) => Promise<T>): Promise<T>;
  /**
   * Statements outside `transaction` that must not abort the caller's transaction if they fail
   * (the audit row of a refusal, createJob's one-statement path): a savepoint in the caller's
   * transaction, nothing extra on the pool.
   */
  atomic<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * One service call at a time on the caller's transaction: two interleaved calls would nest
   * their savepoints wrongly (releasing one releases every later one). Identity on the pool.
   */
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
}

export function createContext(deps: ServiceDeps): ServiceContext {
  const outer = deps.outerTransaction === true;
  const observer = deps.observer ?? noopObserver;
  const boundary = createTransactionBoundary(deps.db, outer, (r) => observer.conflictRetried('mutation', r.sqlstate));
  let tail: Promise<unknown> = Promise.resolve();
  const replica = outer ? undefined : deps.replica;
  return {
    db: deps.db,
    reader: (actor) => (replica && actor.reads === 'replica' && replica.fresh() ? replica.db : deps.db),
    observer,
    outer,
    async transaction(fn) {
      try {
        return await boundary.transaction(fn);
      } catch (error) {
        // Still in conflict after the boundary's tries (or inside a caller's transaction, which
        // retries none): a refusal the caller can try again, not an internal error.
        if (isRetriedConflict(error))
          throw new ConflictError('the change met another change at the same moment and was rolled back: try again', {
            sqlstate: (error as { code: string }).code,
          });
        throw error;
      }
    },
    atomic: boundary.atomic,
    exclusive(fn) {
      if (!outer) return fn();
      const run = tail.then(fn, fn);
      tail = run.catch(() => {});
      return run;
    },
    // Named statements go through the pool's connections, never the caller's.
    pool: outer ? undefined : deps.pool,
    defaultMaxAttempts: deps.defaultMaxAttempts,
    keyCacheMs: deps.keyCacheMs,
    databaseClock: !deps.clock,
    cursors: createCursorKeys(),
    outbound: createOutboundPolicy(deps.outboundAllow ?? []),
    seal(plain, path) {
      if (!deps.secrets) throw ValidationError.at(path, 'cannot store a secret: JOBGATE_SECRET_KEY is not configured');
      return deps.secrets.seal(plain);
    },
    now: deps.clock ?? databaseNow,
  };
}

/** Parses service input; a failure is a VALIDATION_FAILED carrying each bad field's path. */
export function parseInput<S extends ZodType>(schema: S, input: unknown, at: (string | number)[] = []): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) {
    const error = ValidationError.fromZod(result.error);
    throw at.length === 0 ? error : new ValidationError(error.issues.map((i) => ({ ...i, path: [...at, ...i.path] })));
  }
  return result.data;
}
