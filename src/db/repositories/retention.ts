/**
 * A workspace's own retention windows (migration 000026): null columns fall back to the
 * installation's defaults.
 */
import { sql } from 'kysely';
import type { WorkspaceRetentionRecord } from '../types.js';
import { scoped, type Executor } from './scope.js';

export type RetentionOverridesRow = Pick<WorkspaceRetentionRecord, RetentionColumn>;

const COLUMNS = ['executions_days', 'failed_executions_days', 'audit_days', 'runs_days', 'events_hours'] as const;
export type RetentionColumn = (typeof COLUMNS)[number];

export async function findRetention(db: Executor, workspaceId: string): Promise<RetentionOverridesRow | undefined> {
  const { rows } = await sql<RetentionOverridesRow>`
    select executions_days, failed_executions_days, audit_days, runs_days, events_hours
    from workspace_retention where workspace_id = ${scoped(workspaceId)}`.execute(db);
  return rows[0];
}

/**
 * Sets the given columns (null: back to the default), leaving the others as they are; creates
 * the row on first use. Returns the row as it is now.
 */
export async function setRetention(
  db: Executor,
  workspaceId: string,
  patch: Partial<Record<RetentionColumn, number | null>>,
): Promise<RetentionOverridesRow> {
  const ws = scoped(workspaceId);
  const given = COLUMNS.filter((c) => patch[c] !== undefined);
  const value = (c: RetentionColumn) => (patch[c] === undefined ? null : patch[c]);
  const updates = given.length
    ? sql.join(given.map((c) => sql`${sql.ref(c)} = excluded.${sql.ref(c)}`))
    : sql`workspace_id = excluded.workspace_id`;
  const { rows } = await sql<RetentionOverridesRow>`
    insert into workspace_retention (workspace_id, executions_days, failed_executions_days, audit_days, runs_days, events_hours)
    values (${ws}, ${value('executions_days')}, ${value('failed_executions_days')}, ${value('audit_days')}, ${value('runs_days')}, ${value('events_hours')})
    on conflict (workspace_id) do update set ${updates}, updated_at = now()
    returning executions_days, failed_executions_days, audit_days, runs_days, events_hours`.execute(db);
  return rows[0]!;
}
