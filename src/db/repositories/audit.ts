/**
 * The audit log: its one insert (every audited mutation's row, whatever its outcome), and its
 * reads: pages newest first by id (the `audit_log_workspace` index on (workspace_id, id desc)
 * serves every filter combination by walking it and filtering), and a count that stops at its
 * bound.
 */
import { sql } from 'kysely';
import type { AuditLogTable, AuditRow } from '../types.js';
import type { Executor } from './scope.js';

/**
 * The columns an audit row is written with (all of `audit_log` but its id and time). Statements
 * that write jobgate's own audit rows in the same statement as the work they record (the
 * reaper, retention, createJob's one-statement path) restate this list in SQL;
 * test/db/audit-rule.test.ts holds every restatement, and this list, to the table.
 */
export const AUDIT_COLUMNS = [
  'workspace_id',
  'actor_kind',
  'actor_key_id',
  'action',
  'target_type',
  'target_id',
  'input',
  'result_code',
] as const;

export interface NewAuditEntry {
  workspaceId: string;
  actorKind: AuditLogTable['actor_kind'];
  actorKeyId: string | null;
  /** What was done, e.g. "job.create". */
  action: string;
  targetType: string | null;
  targetId: string | null;
  /** The caller's input, redacted, as JSON text (the service's auditInput). */
  input: string;
  /** OK, or the domain error code of the refusal. */
  resultCode: string;
}

/** Writes one audit row, in the caller's transaction (or on its own on the pool). */
export async function insertAuditEntry(ex: Executor, entry: NewAuditEntry): Promise<void> {
  await insertAuditEntries(ex, [entry]);
}

/** Writes audit rows in one statement (a bulk action's, one per item), in the caller's transaction. */
export async function insertAuditEntries(ex: Executor, entries: readonly NewAuditEntry[]): Promise<void> {
  if (entries.length === 0) return;
  await ex.insertInto('audit_log').values(entries.map(auditRow)).execute();
}

function auditRow(entry: NewAuditEntry) {
  // Typed by AUDIT_COLUMNS: a column added there and not here (or here and not there) fails to compile.
  return {
    workspace_id: entry.workspaceId,
    actor_kind: entry.actorKind,
    actor_key_id: entry.actorKeyId,
    action: entry.action,
    target_type: entry.targetType,
    target_id: entry.targetId,
    input: entry.input,
    result_code: entry.resultCode,
  } satisfies Record<(typeof AUDIT_COLUMNS)[number], unknown>;
}

export interface AuditListFilter {
  action?: string | null | undefined;
  targetId?: string | null | undefined;
  resultCode?: string | null | undefined;
}

const where = (workspaceId: string, f: AuditListFilter) => sql`
  workspace_id = ${workspaceId}
  and (${f.action ?? null}::text is null or action = ${f.action ?? null})
  and (${f.targetId ?? null}::text is null or target_id = ${f.targetId ?? null})
  and (${f.resultCode ?? null}::text is null or result_code = ${f.resultCode ?? null})`;

/** Entries below id `beforeId` (all when undefined), newest first, at most `limit`. */
export async function auditPage(
  ex: Executor,
  workspaceId: string,
  f: AuditListFilter,
  opts: { limit: number; beforeId?: bigint | undefined },
): Promise<AuditRow[]> {
  const before = opts.beforeId !== undefined ? sql`and id < ${opts.beforeId.toString()}` : sql``;
  const { rows } =
    await sql<AuditRow>`select * from audit_log where ${where(workspaceId, f)} ${before} order by id desc limit ${opts.limit}`.execute(ex);
  return rows;
}

/** How many entries match, counting at most `limit`. */
export async function countAudit(ex: Executor, workspaceId: string, f: AuditListFilter, limit: number): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from (select 1 from audit_log where ${where(workspaceId, f)} limit ${limit}) m`.execute(ex);
  return rows[0]!.n;
}

/** The workspace's entry with this id, if any. */
export async function findAuditEntry(ex: Executor, workspaceId: string, id: bigint): Promise<AuditRow | undefined> {
  const { rows } = await sql<AuditRow>`select * from audit_log where workspace_id = ${workspaceId} and id = ${id.toString()}`.execute(ex);
  return rows[0];
}
