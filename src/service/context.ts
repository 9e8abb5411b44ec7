import { sql } from 'kysely';
import type { ZodType, z } from 'zod';
import type { Db } from '../db/pool.js';
import type { Executor } from '../db/repos/scope.js';
import { ValidationError } from './errors.js';

/** What every service area is built with. */
export interface ServiceDeps {
  db: Db;
  /** Max attempts when neither the job nor its endpoint sets one. */
  defaultMaxAttempts: number;
  /**
   * The clock. Defaults to the database's `now()` (the transaction's start time): time is the
   * database's. Tests of schedules inject one on purpose.
   */
  clock?: ((ex: Executor) => Promise<Date>) | undefined;
}

export interface ServiceContext {
  db: Db;
  defaultMaxAttempts: number;
  now(ex: Executor): Promise<Date>;
}

export function createContext(deps: ServiceDeps): ServiceContext {
  return {
    db: deps.db,
    defaultMaxAttempts: deps.defaultMaxAttempts,
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
