/**
 * What subscription resolvers call: the service decides who may watch what, the hub delivers.
 * Each function returns an AsyncIterator of the payload the schema exposes.
 */
import type { EventRow } from '../db/queries/events.js';
import type { Actor } from '../service/actor.js';
import { DomainError } from '../service/errors.js';
import type { JobService } from '../service/index.js';
import type { EventStreamInput } from '../service/live.js';
import { toFinding, type Finding, type Run } from '../service/runs.js';
import type { Hub } from './hub.js';
import { mapIterator, mappedOnce } from './map-iterator.js';

export interface LiveEvent {
  /** The event id: pass it back as `after` to resume right after this event. */
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

/** Once per row: every subscriber it matches gets the same object (see ./shared-execution.ts). */
const toEvent = mappedOnce((r: EventRow): LiveEvent => ({
  cursor: r.id,
  subjectId: r.subject_id,
  jobId: r.job_id,
  endpointId: r.endpoint_id,
  name: r.name,
  status: r.status,
  previousStatus: r.previous_status,
  attemptCount: r.attempt_count,
  occurredAt: r.created_at,
}));
const toFindingOnce = mappedOnce(toFinding);

export interface LiveFeeds {
  runProgress(actor: Actor, runId: string): Promise<AsyncIterable<Run>>;
  runFindings(actor: Actor, runId: string, after?: string | null): Promise<AsyncIterable<Finding>>;
  executionUpdates(actor: Actor, input: EventStreamInput): Promise<AsyncIterable<LiveEvent>>;
  jobEvents(actor: Actor, input: EventStreamInput): Promise<AsyncIterable<LiveEvent>>;
  runEvents(actor: Actor, input: EventStreamInput): Promise<AsyncIterable<LiveEvent>>;
  /** New alert notifications (events of topic ALERT, migration 000050). */
  alerts(actor: Actor, input: EventStreamInput): Promise<AsyncIterable<LiveEvent>>;
  /** The same feeds for one client connection: `cutOff` is called when it falls too far behind. */
  forConnection(cutOff: () => void): LiveFeeds;
}

export function createLiveFeeds(service: JobService, hub: Hub, cutOff?: () => void): LiveFeeds {
  const events = async (actor: Actor, topic: 'EXECUTION' | 'JOB' | 'RUN' | 'ALERT', input: EventStreamInput) => {
    const { match, after } = await service.authorizeEventStream(actor, topic, input);
    return mapIterator(hub.events(match, after, cutOff), toEvent);
  };
  return {
    forConnection: (connectionCutOff) => createLiveFeeds(service, hub, connectionCutOff),
    async runProgress(actor, runId) {
      const { runId: id } = await service.authorizeRunStream(actor, runId);
      return hub.run(id);
    },
    async runFindings(actor, runId, after) {
      const target = await service.authorizeRunStream(actor, runId, after);
      return mapIterator(hub.findings(target.runId, target.after, cutOff), toFindingOnce);
    },
    executionUpdates: (actor, input) => events(actor, 'EXECUTION', { ...input, name: undefined }),
    jobEvents: (actor, input) => events(actor, 'JOB', { jobId: input.jobId, after: input.after }),
    runEvents: (actor, input) => events(actor, 'RUN', { name: input.name, after: input.after }),
    alerts: (actor, input) => events(actor, 'ALERT', { after: input.after }),
  };
}

/** For a gateway started without a hub (e.g. in-process tests of queries and mutations). */
const unavailable = async (): Promise<never> => {
  throw new DomainError('UNAVAILABLE', 'live subscriptions are not enabled on this gateway');
};
export const noLiveFeeds: LiveFeeds = {
  runProgress: unavailable,
  runFindings: unavailable,
  executionUpdates: unavailable,
  jobEvents: unavailable,
  runEvents: unavailable,
  alerts: unavailable,
  forConnection: () => noLiveFeeds,
};
