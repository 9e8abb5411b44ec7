/**
 * Every mutation goes through `mutate`: the role check, the transaction, and the audit row
 * written in that same transaction (actor, action, target, redacted input, result). A refused
 * or failed action changes nothing and is audited on its own, with its error code.
 */
import { sql } from 'kysely';
import type { Transaction } from 'kysely';
import type { DB } from '../db/types.js';
import type { Actor, Role } from './actor.js';
import type { ServiceContext } from './context.js';
import { DomainError, ForbiddenError } from './errors.js';
import { MAX_JSON_DEPTH, storableText } from './inputs.js';

const RANK: Record<Role, number> = { VIEWER: 1, OPERATOR: 2, ADMIN: 3 };

export function hasRole(actor: Actor, needed: Role): boolean {
  return RANK[actor.role] >= RANK[needed];
}

/** Throws FORBIDDEN unless the actor's role is at least `needed`. */
export function requireRole(actor: Actor, needed: Role, what: string): void {
  if (!hasRole(actor, needed)) throw new ForbiddenError(`${what} needs the ${needed} role; this key is ${actor.role}`);
}

/**
 * OPERATOR keys may change only what their own key created (or what was created on their
 * behalf); ADMIN may change anything in the workspace.
 */
export function requireOwnership(actor: Actor, createdByKeyId: string | null, what: string): void {
  const refusal = ownershipRefusal(actor, createdByKeyId, what);
  if (refusal) throw refusal;
}

/** The refusal requireOwnership throws, or undefined when the actor may change it. */
export function ownershipRefusal(actor: Actor, createdByKeyId: string | null, what: string): ForbiddenError | undefined {
  if (actor.role === 'ADMIN' || actor.kind === 'system') return undefined;
  if (actor.keyId && createdByKeyId === actor.keyId) return undefined;
  return new ForbiddenError(`an OPERATOR key may change only what it created; ${what} was created by another key`);
}

const SECRET_KEY = /secret|password|passwd|token|api[-_]?key|authorization|cookie|credential|session|x-auth|private[-_]?key/i;

/**
 * The input with secrets replaced: fields named like secrets, and config entries marked secret.
 * It is also made storable as jsonb whatever the caller sent, so that a refusal of input the
 * database cannot hold is still recorded: NUL and unpaired surrogates become U+FFFD, bigints
 * strings, and nesting past MAX_JSON_DEPTH (or a cycle) a marker.
 */
export function redact(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return storableText(value);
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
  if (value && typeof value === 'object' && depth >= MAX_JSON_DEPTH) return '[nested too deep]';
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    // Anything but an explicit "not secret": a refused entry ("true", 1) is still audited, and
    // its value must not be on record in clear because its flag was malformed.
    const secretEntry = 'value' in obj && obj.secret !== undefined && obj.secret !== null && obj.secret !== false;
    return Object.fromEntries(
      Object.entries(obj).map(([k, v]) => [
        storableText(k),
        (secretEntry && k === 'value') || (SECRET_KEY.test(k) && typeof v === 'string') ? '[redacted]' : redact(v, depth + 1),
      ]),
    );
  }
  return value;
}

export interface MutationSpec<T> {
  /** What is done, e.g. "job.create". */
  action: string;
  /** The least role that may do it. */
  role: Role;
  /** The caller's input, recorded redacted. */
  input: unknown;
  /** What it acts on: known up front (an id), or read from the result. */
  target: { type: string; id?: string | undefined } | ((result: T) => { type: string; id?: string | undefined });
}

/** The audit row's `input` column: the caller's input, redacted, as JSON text. */
export function auditInput(input: unknown): string {
  return JSON.stringify(redact(input) ?? {});
}

async function writeAudit(
  ex: Transaction<DB> | ServiceContext['db'],
  actor: Actor,
  action: string,
  target: { type: string; id?: string | undefined } | undefined,
  input: unknown,
  code: string,
): Promise<void> {
  await sql`insert into audit_log (workspace_id, actor_kind, actor_key_id, action, target_type, target_id, input, result_code)
            values (${actor.workspaceId}, ${actor.kind}, ${actor.keyId ?? null}, ${action}, ${target?.type ?? null},
                    ${target?.id ?? null}, ${auditInput(input)}, ${code})`.execute(ex);
}

/**
 * For a mutation done by one statement that writes its own 'OK' audit row (its input from
 * `auditInput`), after the caller checked the role: a failure is audited as `mutate` audits it.
 */
export async function auditingFailure<T>(
  ctx: ServiceContext,
  actor: Actor,
  action: string,
  input: unknown,
  fn: () => Promise<T>,
): Promise<T> {
  return ctx.exclusive(async () => {
    try {
      return await ctx.atomic(fn);
    } catch (error) {
      const code = error instanceof DomainError ? error.code : 'INTERNAL_ERROR';
      await ctx.atomic(() => writeAudit(ctx.db, actor, action, undefined, input, code)).catch(() => {});
      throw error;
    }
  });
}

/**
 * Runs `fn` in the service's transaction (ctx.transaction: its own, or a savepoint of the
 * caller's) with the audit row. A refusal is audited after the rollback; inside a caller's
 * transaction that row is the caller's too, and goes where the caller's work goes.
 */
export async function mutate<T>(
  ctx: ServiceContext,
  actor: Actor,
  spec: MutationSpec<T>,
  fn: (trx: Transaction<DB>) => Promise<T>,
): Promise<T> {
  const upfront = typeof spec.target === 'function' ? undefined : spec.target;
  return ctx.exclusive(async () => {
    try {
      requireRole(actor, spec.role, spec.action);
      return await ctx.transaction(async (trx) => {
        const result = await fn(trx);
        const target = typeof spec.target === 'function' ? spec.target(result) : spec.target;
        await writeAudit(trx, actor, spec.action, target, spec.input, 'OK');
        return result;
      });
    } catch (error) {
      const code = error instanceof DomainError ? error.code : 'INTERNAL_ERROR';
      // The change rolled back; the refusal is still on record.
      await ctx.atomic(() => writeAudit(ctx.db, actor, spec.action, upfront, spec.input, code)).catch(() => {});
      throw error;
    }
  });
}
