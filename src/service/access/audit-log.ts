/**
 * Reading the audit log (ADMIN only): pages newest first, filterable, and single entries by
 * their sealed ids. What writes it is the audited mutation boundary (../kernel/audited-mutation.ts).
 */
import { z } from 'zod';
import { auditPage, countAudit, findAuditEntry } from '../../db/repositories/audit.js';
import { scoped } from '../../db/repositories/scope.js';
import type { AuditRow } from '../../db/types.js';
import type { Actor } from '../kernel/actor.js';
import { requireRole } from '../kernel/authorisation.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import type { WorkspaceCursors } from '../kernel/cursors.js';
import { NotFoundError } from '../kernel/errors.js';
import { pageSchema, text, type PageInput } from '../kernel/inputs.js';
import { COUNT_LIMIT, pageConnection, pageSize, type Connection } from '../kernel/pagination.js';

export interface AuditEntry {
  /** Opaque and stable: the row's id sealed with its workspace's key (../kernel/cursors.ts). */
  id: string;
  actorKind: string;
  actorKeyId: string | null;
  action: string;
  targetType: string | null;
  targetId: string | null;
  input: unknown;
  resultCode: string;
  createdAt: Date;
}

export interface AuditPage {
  entries: AuditEntry[];
  /** Pass as `after` for the next (older) page; null at the end. */
  nextCursor: string | null;
}

const toAuditEntry = (r: AuditRow, cursors: WorkspaceCursors): AuditEntry => ({
  id: cursors.seal('audit', r.id),
  actorKind: r.actor_kind,
  actorKeyId: r.actor_key_id,
  action: r.action,
  targetType: r.target_type,
  targetId: r.target_id,
  input: r.input,
  resultCode: r.result_code,
  createdAt: r.created_at,
});

export const auditFilterSchema = z.object({
  action: text().max(100).nullish(),
  targetId: text().max(100).nullish(),
  resultCode: text().max(100).nullish(),
  first: z.number().int().min(1).max(200).nullish(),
  after: text().max(100).nullish(),
});
export type AuditFilter = z.input<typeof auditFilterSchema>;

export const auditLogFilterSchema = auditFilterSchema.pick({ action: true, targetId: true, resultCode: true });
export type AuditLogFilter = z.input<typeof auditLogFilterSchema>;

export function createAuditLogService(ctx: ServiceContext) {
  const { db } = ctx;

  return {
    /** The audit log, newest first, filterable. ADMIN only. */
    async auditLog(actor: Actor, raw: AuditFilter = {}): Promise<AuditPage> {
      requireRole(actor, 'ADMIN', 'reading the audit log');
      const f = parseInput(auditFilterSchema, raw);
      const size = f.first ?? 50;
      const cursors = await ctx.cursors.forWorkspace(db, scoped(actor.workspaceId));
      const beforeId = f.after ? cursors.open('audit', f.after, ['after']) : undefined;
      // An empty filter value filters nothing here (this list's rule since it began).
      const filter = { action: f.action || null, targetId: f.targetId || null, resultCode: f.resultCode || null };
      const rows = await auditPage(db, scoped(actor.workspaceId), filter, { limit: size + 1, beforeId });
      const entries = rows.slice(0, size).map((r) => toAuditEntry(r, cursors));
      return {
        entries,
        // A page goes on after (below) its last entry: its id is the cursor.
        nextCursor: rows.length > size ? entries.at(-1)!.id : null,
      };
    },

    /**
     * The audit log, newest first, filterable, a page at a time, with a bounded count when asked
     * for. ADMIN only (FORBIDDEN). VALIDATION_FAILED for a cursor this list did not issue (another
     * list's, another workspace's) or a page size out of range.
     */
    async auditLogConnection(actor: Actor, rawFilter: AuditLogFilter = {}, rawPage: PageInput = {}): Promise<Connection<AuditEntry>> {
      requireRole(actor, 'ADMIN', 'reading the audit log');
      const filter = parseInput(auditLogFilterSchema, rawFilter);
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const ws = scoped(actor.workspaceId);
      const cursors = await ctx.cursors.forWorkspace(db, ws);
      const beforeId = page.after ? cursors.open('audit', page.after, ['after']) : undefined;
      const rows = await auditPage(db, ws, filter, { limit: size + 1, beforeId });
      // An entry's id is its cursor: the page after it is the entries below it.
      return pageConnection(
        rows.map((r) => toAuditEntry(r, cursors)),
        size,
        (e) => e.id,
        () => countAudit(db, ws, filter, COUNT_LIMIT),
      );
    },

    /** One audit entry by its (sealed) id. ADMIN only (FORBIDDEN); NOT_FOUND otherwise. */
    async auditEntry(actor: Actor, id: string): Promise<AuditEntry> {
      requireRole(actor, 'ADMIN', 'reading the audit log');
      const ws = scoped(actor.workspaceId);
      const cursors = await ctx.cursors.forWorkspace(db, ws);
      let rowId: bigint;
      try {
        rowId = cursors.open('audit', id, ['id']);
      } catch {
        throw new NotFoundError('AuditEntry', id);
      }
      const row = await findAuditEntry(db, ws, rowId);
      if (!row) throw new NotFoundError('AuditEntry', id);
      return toAuditEntry(row, cursors);
    },
  };
}
