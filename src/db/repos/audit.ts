/**
 * Reading the audit log: pages newest first by id (the `audit_log_workspace` index on
 * (workspace_id, id desc) serves every filter combination by walking it and filtering), and a
 * count that stops at its bound.
 */
import { sql } from 'kysely';
import type { AuditRow } from '../types.js';
import type { Executor } from './scope.js';

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
