/**
 * The audited mutation boundary. Every mutation goes through `mutate`: the role check, the
 * transaction, and the audit row written in that same transaction (actor, action, target,
 * redacted input, result). A refused or failed action changes nothing and is audited on its own,
 * with its error code.
 */
import type { Transaction } from 'kysely';
import { insertAuditEntries, insertAuditEntry, type NewAuditEntry } from '../../db/repositories/audit.js';
import type { Executor } from '../../db/repositories/scope.js';
import type { DB } from '../../db/types.js';
import type { Actor, Role } from './actor.js';
import { requireRole } from './authorisation.js';
import type { ServiceContext } from './context.js';
import { DomainError } from './errors.js';
import { MAX_JSON_DEPTH, storableText } from './inputs.js';

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

function auditEntry(
  actor: Actor,
  action: string,
  target: { type: string; id?: string | undefined } | undefined,
  input: unknown,
  code: string,
): NewAuditEntry {
  return {
    workspaceId: actor.workspaceId,
    actorKind: actor.kind,
    actorKeyId: actor.keyId ?? null,
    action,
    targetType: target?.type ?? null,
    targetId: target?.id ?? null,
    input: auditInput(input),
    resultCode: code,
  };
}

async function writeAudit(
  ex: Executor,
  actor: Actor,
  action: string,
  target: { type: string; id?: string | undefined } | undefined,
  input: unknown,
  code: string,
): Promise<void> {
  await insertAuditEntry(ex, auditEntry(actor, action, target, input, code));
}

/** 'OK' audit rows for actions done inside another mutation's transaction (a batch's members), in `trx`, in one statement. */
export async function auditDone(
  trx: Executor,
  actor: Actor,
  action: string,
  done: readonly { target: { type: string; id: string }; input: unknown }[],
): Promise<void> {
  if (done.length > 0)
    await insertAuditEntries(
      trx,
      done.map((a) => auditEntry(actor, action, a.target, a.input, 'OK')),
    );
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

/**
 * The audited boundary of one action done to many items at once, all or nothing (createJobs):
 * `fn` does every item in one transaction (ctx.transaction) and returns, with its result, the
 * audit rows it did not write itself: one per item, the single action's 'OK' row (target and
 * input), written in that same transaction. A refusal rolls every item back and is audited once,
 * with its code and the input `failedInput` names (the item that failed, when known).
 */
export async function mutateAll<T>(
  ctx: ServiceContext,
  actor: Actor,
  spec: { action: string; role: Role; failedInput: (error: unknown) => unknown },
  fn: (trx: Transaction<DB>) => Promise<{ result: T; audit: { target: { type: string; id: string }; input: unknown }[] }>,
): Promise<T> {
  return ctx.exclusive(async () => {
    try {
      requireRole(actor, spec.role, spec.action);
      return await ctx.transaction(async (trx) => {
        const { result, audit } = await fn(trx);
        await auditDone(trx, actor, spec.action, audit);
        return result;
      });
    } catch (error) {
      const code = error instanceof DomainError ? error.code : 'INTERNAL_ERROR';
      await ctx.atomic(() => writeAudit(ctx.db, actor, spec.action, undefined, spec.failedInput(error), code)).catch(() => {});
      throw error;
    }
  });
}

/**
 * The audited boundary of one chunk of a bulk action (../jobs/bulk.ts): `fn` applies the single action
 * to every item of `ids` in one transaction (ctx.transaction) and returns each item's outcome:
 * its result, or the refusal the single action would have thrown. Every item gets the audit row
 * its single action writes (`action`, target `{ type, id }`, input `{ id }`, OK or the refusal's
 * code), written in one statement in that same transaction. A refusal leaves its item as it was;
 * the others go on. Anything else thrown rolls the whole chunk back, audits each of its items with
 * the failure's code (as `mutate` audits a failure), and is thrown.
 */
export async function mutateEach<T>(
  ctx: ServiceContext,
  actor: Actor,
  spec: { action: string; role: Role; targetType: string },
  ids: readonly string[],
  fn: (trx: Transaction<DB>) => Promise<Map<string, T | DomainError>>,
): Promise<Map<string, T | DomainError>> {
  const entries = (codeOf: (id: string) => string) =>
    ids.map((id) => auditEntry(actor, spec.action, { type: spec.targetType, id }, { id }, codeOf(id)));
  return ctx.exclusive(async () => {
    try {
      requireRole(actor, spec.role, spec.action);
      return await ctx.transaction(async (trx) => {
        const outcomes = await fn(trx);
        await insertAuditEntries(
          trx,
          entries((id) => {
            const outcome = outcomes.get(id);
            return outcome instanceof DomainError ? outcome.code : 'OK';
          }),
        );
        return outcomes;
      });
    } catch (error) {
      const code = error instanceof DomainError ? error.code : 'INTERNAL_ERROR';
      await ctx
        .atomic(() =>
          insertAuditEntries(
            ctx.db,
            entries(() => code),
          ),
        )
        .catch(() => {});
      throw error;
    }
  });
}
