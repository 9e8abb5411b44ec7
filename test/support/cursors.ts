/**
 * A workspace's cursors as the gateway seals them (src/service/kernel/cursors.ts), for tests that relate
 * what a stream or page shows to the rows behind it.
 */
import { openId, sealId, type CursorKind } from '../../src/service/kernel/cursors.js';
import type { TestDb } from './db.js';

export interface TestCursors {
  seal(kind: CursorKind, id: bigint | number | string): string;
  /** The id a cursor seals (throws when it is not one of this workspace). */
  open(kind: CursorKind, cursor: string): bigint;
}

export async function cursorsOf(t: TestDb, workspaceId: string): Promise<TestCursors> {
  const key = (await t.query<{ cursor_key: Buffer }>('select cursor_key from workspaces where id = $1', [workspaceId])).rows[0]!.cursor_key;
  return {
    seal: (kind, id) => sealId(key, kind, id),
    open(kind, cursor) {
      const id = openId(key, kind, cursor);
      if (id === undefined) throw new Error(`not a ${kind} cursor of this workspace: ${cursor}`);
      return id;
    },
  };
}
