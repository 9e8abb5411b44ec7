/**
 * The event cursor a mutation answers with, so a page that subscribes `after` it receives every
 * event the mutation caused, once. It is read before the mutation's first transaction begins:
 * every event the mutation writes (by triggers, in its transactions) takes a higher id from the
 * events sequence, so a stream from this cursor replays all of them, whenever it starts, and the
 * hub delivers each id once. It may also replay events of other changes committed meanwhile; it
 * never skips one of the mutation's own.
 */
import { latestEventPosition } from '../../db/statements/events.js';
import { scoped } from '../../db/repositories/scope.js';
import type { ServiceContext } from '../kernel/context.js';

/** The sealed cursor of the events sequence's current position, for the workspace's streams. */
export async function eventCursorNow(ctx: ServiceContext, workspaceId: string): Promise<string> {
  const ws = scoped(workspaceId);
  const cursors = await ctx.cursors.forWorkspace(ctx.db, ws);
  return cursors.seal('event', await latestEventPosition(ctx.db));
}

/** Runs `fn` (a mutation) and adds the event cursor read just before it to its result. */
export async function withEventCursor<T extends object>(
  ctx: ServiceContext,
  workspaceId: string,
  fn: () => Promise<T>,
): Promise<T & { eventCursor: string }> {
  const eventCursor = await eventCursorNow(ctx, workspaceId);
  return { ...(await fn()), eventCursor };
}
