/**
 * Opaque, per-workspace cursors for the lists whose rows take their ids from installation-wide
 * sequences: live events (`cursor`, `after`), findings (`id`, `nextCursor`, `after`) and the
 * audit log (`id`, `nextCursor`, `after`). Shown as they are, those ids let any key watch the
 * whole installation's activity: a VIEWER of one workspace saw another create 10 jobs as its
 * own cursors jumped by 20.
 *
 * The choice: each id is sealed with its workspace's own key, one AES-256 block
 * (kind byte, seven zero bytes, the id as 64 bits) encrypted and written in base64url
 * (22 characters). Deterministic, so the same row always has the same cursor and a finding's or
 * audit entry's `id` stays a stable identifier; a block cipher is a permutation, so no two ids
 * share one, and without the key a cursor says nothing of the id in it, of the order of two
 * cursors, or of the distance between them. Opening checks the kind byte and the zeros: a
 * cursor of another list, of another workspace (another key) or made up fails that with odds
 * of 2^-64 against, and is VALIDATION_FAILED. A cursor therefore names only a row that exists,
 * which also closes the oracle "is this id handed out yet?" that raw ids offered.
 *
 * The alternative, numbering rows per workspace, keeps cursors readable (harmlessly: one's own
 * workspace only) but needs a counter row per workspace that every event-writing transaction
 * would update (events are written by triggers on every execution change, so that row would
 * serialise a workspace's whole engine), and the live hub orders and deduplicates by the global
 * id (its watermark), so each workspace number would need mapping back. Sealing changes only
 * what crosses the API: the type of every field stays (`String`, `ID`), only its content changes.
 *
 * Keys are random per workspace (migration 000016: `workspaces.cursor_key`), never leave the
 * database or this process, and never change, so each is read once per process and kept.
 */
import { createCipheriv, createDecipheriv } from 'node:crypto';
import type { Executor } from '../../db/repositories/scope.js';
import { findCursorKey } from '../../db/repositories/workspaces.js';
import { ValidationError } from './errors.js';

export type CursorKind = 'event' | 'finding' | 'audit';
const KIND: Record<CursorKind, number> = { event: 1, finding: 2, audit: 3 };
const SEALED = /^[A-Za-z0-9_-]{22}$/;

export function sealId(key: Buffer, kind: CursorKind, id: bigint | number | string): string {
  const block = Buffer.alloc(16);
  block[0] = KIND[kind];
  block.writeBigUInt64BE(BigInt(id), 8);
  const cipher = createCipheriv('aes-256-ecb', key, null).setAutoPadding(false);
  return Buffer.concat([cipher.update(block), cipher.final()]).toString('base64url');
}

/** The id a cursor seals, or undefined when it is not one of `kind` sealed with `key`. */
export function openId(key: Buffer, kind: CursorKind, text: string): bigint | undefined {
  if (!SEALED.test(text)) return undefined;
  const raw = Buffer.from(text, 'base64url');
  if (raw.length !== 16) return undefined;
  const decipher = createDecipheriv('aes-256-ecb', key, null).setAutoPadding(false);
  const block = Buffer.concat([decipher.update(raw), decipher.final()]);
  if (block[0] !== KIND[kind] || block.subarray(1, 8).some((b) => b !== 0)) return undefined;
  return block.readBigUInt64BE(8);
}

/** One workspace's sealing, bound to its key. */
export interface WorkspaceCursors {
  seal(kind: CursorKind, id: bigint | number | string): string;
  /** The id in `text`; VALIDATION_FAILED at `path` when it is not a cursor of this kind and workspace. */
  open(kind: CursorKind, text: string, path: (string | number)[], message?: string): bigint;
}

export interface CursorKeys {
  /** The workspace's sealing (its key read once per process). */
  forWorkspace(db: Executor, workspaceId: string): Promise<WorkspaceCursors>;
  /** The same, for a workspace whose key this process has already read (a stream it authorised). */
  known(workspaceId: string): WorkspaceCursors | undefined;
}

export function createCursorKeys(): CursorKeys {
  const cache = new Map<string, WorkspaceCursors>();
  const bind = (key: Buffer): WorkspaceCursors => ({
    seal: (kind, id) => sealId(key, kind, id),
    open(kind, text, path, message = 'is not a cursor returned by this list') {
      const id = openId(key, kind, text);
      if (id === undefined) throw ValidationError.at(path, message);
      return id;
    },
  });
  return {
    known: (workspaceId) => cache.get(workspaceId),
    async forWorkspace(db, workspaceId) {
      const cached = cache.get(workspaceId);
      if (cached) return cached;
      const bound = bind(await findCursorKey(db, workspaceId));
      cache.set(workspaceId, bound);
      return bound;
    },
  };
}
