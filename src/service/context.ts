import { sql } from 'kysely';
import type pg from 'pg';
import type { ZodType, z } from 'zod';
import type { Db } from '../db/pool.js';
import type { Executor } from '../db/repos/scope.js';
import { createCursorKeys, type CursorKeys } from './cursors.js';
import { ValidationError } from './errors.js';
import type { SecretBox } from './secrets.js';

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
}

export interface ServiceContext {
  db: Db;
  pool: pg.Pool | undefined;
  defaultMaxAttempts: number;
  now(ex: Executor): Promise<Date>;
  /** Whether `now` is the database's own `now()` (no clock injected), so SQL may use now() for it. */
  databaseClock: boolean;
  /** Seals a secret for storage; throws VALIDATION_FAILED at `path` when no key is configured. */
  seal(plain: string, path: (string | number)[]): string;
  /** Per-workspace opaque cursors for events, findings and audit entries (./cursors.ts). */
  cursors: CursorKeys;
}

export function createContext(deps: ServiceDeps): ServiceContext {
  return {
    db: deps.db,
    pool: deps.pool,
    defaultMaxAttempts: deps.defaultMaxAttempts,
    databaseClock: !deps.clock,
    cursors: createCursorKeys(),
    seal(plain, path) {
      if (!deps.secrets) throw ValidationError.at(path, 'cannot store a secret: JOBGATE_SECRET_KEY is not configured');
      return deps.secrets.seal(plain);
    },
    now:
      deps.clock ??
      (async (ex) => {
        const { rows } = await sql<{ now: Date }>`select now() as now`.execute(ex);
        return rows[0]!.now;
      }),
  };
}

/** Parses service input; a failure is a VALIDATION_FAILED carrying each bad field's path. */
export function parseInput<S extends ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw ValidationError.fromZod(result.error);
  return result.data;
}
