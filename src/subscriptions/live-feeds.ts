/**
 * What subscription resolvers call: the service decides who may watch what, the hub delivers.
 * Each function returns an AsyncIterator of the payload the schema exposes.
 */
import type { EventRow, FindingRow } from '../db/statements/events.js';
import type { Actor } from '../service/kernel/actor.js';
import { DomainError } from '../service/kernel/errors.js';
import type { JobService } from '../service/index.js';
import type { WorkspaceCursors } from '../service/kernel/cursors.js';
import type { EventStreamInput } from '../service/live/live.js';
import type { Batch } from '../service/kernel/models.js';
import type { HandlerFilter, HandlerInfo } from '../service/handlers/handlers.js';
import { CatalogWatch } from './handler-catalogue-watch.js';
import { toFinding, type Finding, type Run } from '../service/runs/runs.js';
import type { Feed } from './hub/feed.js';
import type { Hub } from './hub/hub.js';
import { KeyWatch } from './key-watch.js';
import { mapIterator, mappedOnce } from './map-iterator.js';

export interface LiveEvent {
  /** The event's id sealed for its workspace: pass it back as `after` to resume right after this event. */
  cursor: string;
  subjectId: string;
  jobId: string | null;
  endpointId: string | null;
  name: string | null;
  status: string;
  previousStatus: string | null;
  attemptCount: number | null;
  occurredAt: Date;
}

/**
 * Once per row: every subscriber it matches gets the same object (see ./shared-event-results.ts).
 * The cursor is sealed with the workspace's key (src/service/kernel/cursors.ts); every subscriber a row
 * matches is of its workspace, so whichever maps it first seals it as all would.
 */
const eventOnce = mappedOnce<EventRow, LiveEvent>();
const toEvent = (cursorOf: (id: number) => string) =>
  eventOnce((r) => ({
    cursor: cursorOf(r.id),
    subjectId: r.subject_id,
    jobId: r.job_id,
    endpointId: r.endpoint_id,
    name: r.name,
    status: r.status,
    previousStatus: r.previous_status,
    attemptCount: r.attempt_count,
    occurredAt: r.created_at,
  }));
const findingOnce = mappedOnce<FindingRow, Finding>();
const toFindingOnce = (cursors: WorkspaceCursors) => findingOnce((r) => toFinding(r, cursors));

export interface LiveFeeds {
  runProgress(actor: Actor, runId: string): Promise<AsyncIterable<Run>>;
  /** The batch now, then each time its counts or state change; completes once it has completed. */
  batchProgress(actor: Actor, batchId: string): Promise<AsyncIterable<Batch>>;
  runFindings(actor: Actor, runId: string, after?: string | null): Promise<AsyncIterable<Finding>>;
  executionUpdates(actor: Actor, input: EventStreamInput): Promise<AsyncIterable<LiveEvent>>;
  jobEvents(actor: Actor, input: EventStreamInput): Promise<AsyncIterable<LiveEvent>>;
  runEvents(actor: Actor, input: EventStreamInput): Promise<AsyncIterable<LiveEvent>>;
  /** New alert notifications (events of topic ALERT, migration 000020). */
  alerts(actor: Actor, input: EventStreamInput): Promise<AsyncIterable<LiveEvent>>;
  /** The handler catalogue now, then each time it changes (./handler-catalogue-watch.ts). */
  handlerCatalog(actor: Actor, filter: HandlerFilter): Promise<AsyncIterable<HandlerInfo[]>>;
  /** The same feeds for one client connection: `cutOff` is called when it falls too far behind. */
  forConnection(cutOff: () => void): LiveFeeds;
  /**
   * Calls `end` once if the actor's key lapses (revoked, another role) while this watches; for
   * what a transport holds open beside its streams (a WebSocket). Returns the unwatch.
   */
  watchKey(actor: Actor, end: (error: DomainError) => void): () => void;
}

export interface LiveFeedOptions {
  /** How often the keys of open streams are checked again, notifications or not. Default 5 s. */
  keyRecheckMs?: number | undefined;
}

export function createLiveFeeds(service: JobService, hub: Hub, options: LiveFeedOptions = {}): LiveFeeds {
  // One watch per process, fed by the hub's listening connection: every stream opened here ends
  // when its key lapses (./key-watch.ts), whatever the transport.
  const keys = new KeyWatch({
    lapsedActors: (actors) => service.lapsedActors(actors),
    log: hub.log,
    recheckMs: options.keyRecheckMs ?? 5_000,
  });
  hub.onKeyHint((keyId) => {
    service.apiKeyChanged(keyId);
    keys.hint(keyId);
  });
  const catalog = new CatalogWatch({
    read: (actor, filter) => service.handlerCatalog(actor, filter),
    audience: (actor) => service.handlerCatalogAudience(actor),
    onHint: (fn) => hub.onCatalogHint(fn),
    log: hub.log,
  });
  return feedsFor(service, hub, keys, catalog, undefined);
}

/** A hub feed that fails with UNAUTHENTICATED when its actor's key lapses. */
function guarded<T>(keys: KeyWatch, actor: Actor, feed: Feed<T>): Feed<T> {
  feed.whenEnded(keys.watch(actor, (error) => feed.fail(error)));
  return feed;
}

function feedsFor(service: JobService, hub: Hub, keys: KeyWatch, catalog: CatalogWatch, cutOff: (() => void) | undefined): LiveFeeds {
  const events = async (actor: Actor, topic: 'EXECUTION' | 'JOB' | 'RUN' | 'ALERT', input: EventStreamInput) => {
    const { match, after, cursorOf } = await service.authorizeEventStream(actor, topic, input);
    return mapIterator(guarded(keys, actor, hub.events(match, after, cursorOf, cutOff)), toEvent(cursorOf));
  };
  return {
    forConnection: (connectionCutOff) => feedsFor(service, hub, keys, catalog, connectionCutOff),
    watchKey: (actor, end) => keys.watch(actor, end),
    async runProgress(actor, runId) {
      const { runId: id } = await service.authorizeRunStream(actor, runId);
      return guarded(keys, actor, hub.run(id));
    },
    async batchProgress(actor, batchId) {
      const { batchId: id } = await service.authorizeBatchStream(actor, batchId);
      return guarded(keys, actor, hub.batch(id));
    },
    async runFindings(actor, runId, after) {
      const target = await service.authorizeRunStream(actor, runId, after);
      return mapIterator(guarded(keys, actor, hub.findings(target.runId, target.after, cutOff)), toFindingOnce(target.cursors));
    },
    executionUpdates: (actor, input) => events(actor, 'EXECUTION', { ...input, name: undefined }),
    jobEvents: (actor, input) => events(actor, 'JOB', { jobId: input.jobId, after: input.after }),
    runEvents: (actor, input) => events(actor, 'RUN', { name: input.name, after: input.after }),
    alerts: (actor, input) => events(actor, 'ALERT', { after: input.after }),
    // A state, not a backlog (one catalogue, coalesced): a slow client is never cut off.
    handlerCatalog: async (actor, filter) => guarded(keys, actor, await catalog.watch(actor, filter)),
  };
}

/** For a gateway started without a hub (e.g. in-process tests of queries and mutations). */
const unavailable = async (): Promise<never> => {
  throw new DomainError('UNAVAILABLE', 'live subscriptions are not enabled on this gateway');
};
export const noLiveFeeds: LiveFeeds = {
  runProgress: unavailable,
  batchProgress: unavailable,
  runFindings: unavailable,
  executionUpdates: unavailable,
  jobEvents: unavailable,
  runEvents: unavailable,
  alerts: unavailable,
  handlerCatalog: unavailable,
  forConnection: () => noLiveFeeds,
  // Without streams, nothing outlives its request but a WebSocket, whose every operation is
  // authenticated anew.
  watchKey: () => () => {},
};
