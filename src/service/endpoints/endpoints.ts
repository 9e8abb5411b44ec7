/**
 * Endpoints: where work is delivered. Names are unique among live endpoints of a workspace.
 * Payload-spec and config references are checked against the caller's workspace (and the
 * composite foreign keys make a cross-workspace reference impossible in any case).
 */
import * as configsRepo from '../../db/repositories/configs.js';
import * as endpointsRepo from '../../db/repositories/endpoints.js';
import * as executionsRepo from '../../db/repositories/executions.js';
import * as jobsRepo from '../../db/repositories/jobs.js';
import * as specsRepo from '../../db/repositories/payload-specs.js';
import type { Executor } from '../../db/repositories/scope.js';
import { isPgError, UNIQUE_VIOLATION } from '../../db/sqlstate.js';
import type { EndpointPatch, EndpointRow, EndpointType } from '../../db/types.js';
import { isSystem, type Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { assertMayAimAt } from './config-secrets.js';
import { endpointRefusal } from '../access/permissions.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../kernel/errors.js';
import {
  DEFAULT_BACKOFF_BASE_MS,
  DEFAULT_BACKOFF_MAX_MS,
  endpointRefSchema,
  pageSchema,
  registerEndpointSchema,
  updateEndpointSchema,
  type EndpointRef,
  type PageInput,
  type RegisterEndpointInput,
  type UpdateEndpointInput,
} from '../kernel/inputs.js';
import { toEndpoint, type Endpoint } from '../kernel/models.js';
import { batchedRead } from '../kernel/batched-reads.js';
import { literalTargetRefusal, targetWarnings, type TargetWarning } from './outbound-policy.js';

export type { TargetWarning };
import { decodeCursor, pageSize, toConnection, type Connection } from '../kernel/pagination.js';

async function assertRefs(
  ex: Executor,
  actor: Actor,
  refs: { payloadSpecId?: string | null | undefined; configId?: string | null | undefined },
): Promise<void> {
  if (refs.payloadSpecId && !(await specsRepo.findPayloadSpecById(ex, actor.workspaceId, refs.payloadSpecId))) {
    throw new NotFoundError('PayloadSpec', refs.payloadSpecId);
  }
  if (refs.configId) {
    // Locked: a setConfig writing secrets beside this check would otherwise look for the endpoints
    // using the config before this one is written, and this check read the entries before those.
    const config = await configsRepo.findConfigById(ex, actor.workspaceId, refs.configId, { forShare: true });
    if (!config) throw new NotFoundError('Config', refs.configId);
    assertMayAimAt(actor, config);
  }
}

/**
 * Looks an endpoint up by id or by name, in the actor's workspace. Throws NOT_FOUND.
 * By name finds only the live endpoint; by id also an archived one.
 */
export async function resolveEndpoint(
  ex: Executor,
  actor: Actor,
  ref: { id?: string | null; name?: string | null },
  opts: { forShare?: boolean } = {},
): Promise<EndpointRow> {
  const row = ref.id
    ? await endpointsRepo.findEndpointById(ex, actor.workspaceId, ref.id, opts)
    : await endpointsRepo.findEndpointByName(ex, actor.workspaceId, ref.name ?? '', opts);
  if (!row) throw new NotFoundError('Endpoint', ref.id ?? ref.name ?? '');
  return row;
}

/**
 * Validation at the door: an url whose host is an IP literal the outbound policy refuses (the
 * metadata address, loopback, private ranges not in JOBGATE_OUTBOUND_ALLOW) can never be
 * delivered to, so it is refused now (VALIDATION_FAILED at `url`) rather than as a FAILED
 * execution later. A host name is not refused here (see endpointTargetWarnings): DNS can change,
 * and the check on the address connected to, at each delivery, stays the authority.
 */
function assertTargetAllowed(ctx: ServiceContext, url: string): void {
  const refusal = literalTargetRefusal(ctx.outbound, url);
  if (refusal) throw ValidationError.at(['url'], `cannot be delivered to: ${refusal}`);
}

type RateLimitInput = { count: number; periodMs: number; burst?: number | null | undefined } | null;

/** The rate limit's columns (all null: no limit); the burst defaults to the count. */
function rateLimitColumns(limit: RateLimitInput) {
  return {
    rate_limit_count: limit?.count ?? null,
    rate_limit_period_ms: limit?.periodMs ?? null,
    rate_limit_burst: limit ? (limit.burst ?? limit.count) : null,
  };
}

/** The same for the rate limit per concurrency key. */
function keyRateLimitColumns(limit: RateLimitInput) {
  const c = rateLimitColumns(limit);
  return {
    key_rate_limit_count: c.rate_limit_count,
    key_rate_limit_period_ms: c.rate_limit_period_ms,
    key_rate_limit_burst: c.rate_limit_burst,
  };
}

function assertMutable(actor: Actor, row: EndpointRow): void {
  const refusal = endpointRefusal(actor, row);
  if (refusal) throw refusal;
}

// eslint-disable-next-line max-lines-per-function -- an area factory: short methods sharing one context, its length theirs added up
export function createEndpointService(ctx: ServiceContext) {
  const { db } = ctx;

  /**
   * The body of pauseEndpoint and resumeEndpoint: one audited mutation, the endpoint row locked.
   * A resume also lifts a hold the target asked for with Retry-After: the operator's word on
   * when to send again wins over the target's.
   */
  function setPaused(actor: Actor, id: string, paused: boolean): Promise<Endpoint> {
    const action = paused ? 'endpoint.pause' : 'endpoint.resume';
    return mutate(ctx, actor, { action, role: 'OPERATOR', input: { id }, target: { type: 'Endpoint', id } }, async (trx) => {
      const row = await endpointsRepo.findEndpointById(trx, actor.workspaceId, id, { forUpdate: true });
      if (!row) throw new NotFoundError('Endpoint', id);
      assertMutable(actor, row);
      const lifted = !paused && (await endpointsRepo.liftRetryAfter(trx, row.id));
      if ((row.paused_at !== null) === paused && !lifted) return toEndpoint(row);
      const changed =
        (row.paused_at !== null) === paused ? row : await endpointsRepo.setEndpointPaused(trx, actor.workspaceId, row.id, paused);
      // Workers idle for want of claimable work learn that there is some now.
      if (!paused) await executionsRepo.notifyWork(trx);
      return toEndpoint(changed);
    });
  }

  // A list's rows read their endpoint together (../kernel/batched-reads.ts): a page of jobs or
  // executions showing each one's endpoint asked one query per row.
  const endpointOf = batchedRead(
    (ws, ids) => endpointsRepo.findEndpointsByIds(db, ws, ids).then((rows) => new Map(rows.map((r) => [r.id, r]))),
    !ctx.outer,
  );

  const holdOf = batchedRead(
    (ws, ids) => endpointsRepo.activeRetryAfterHolds(db, ws, ids).then((rows) => new Map(rows.map((r) => [r.endpoint_id, r]))),
    !ctx.outer,
  );

  const keysOf = batchedRead(
    (ws, ids) =>
      endpointsRepo.busiestKeys(db, ws, ids).then((rows) => {
        const byEndpoint = new Map<string, { key: string; running: number; pending: number }[]>();
        for (const r of rows) {
          const list = byEndpoint.get(r.endpoint_id) ?? [];
          list.push({ key: r.key, running: r.running, pending: r.pending });
          byEndpoint.set(r.endpoint_id, list);
        }
        return byEndpoint;
      }),
    !ctx.outer,
  );

  return {
    /**
     * Registers an endpoint. Throws VALIDATION_FAILED, NOT_FOUND (a referenced spec or config),
     * CONFLICT (a live endpoint has the name), FORBIDDEN (an INTERNAL endpoint from a non-system actor).
     */
    async registerEndpoint(actor: Actor, raw: RegisterEndpointInput, opts: { type?: EndpointType } = {}): Promise<Endpoint> {
      const target = (r: Endpoint) => ({ type: 'Endpoint', id: r.id });
      return mutate(ctx, actor, { action: 'endpoint.register', role: 'OPERATOR', input: raw, target }, async (trx) => {
        const input = parseInput(registerEndpointSchema, raw);
        const type = opts.type ?? 'USER';
        // A library caller may pass anything here; the table's check would otherwise be the guard.
        if (type !== 'USER' && type !== 'INTERNAL') throw ValidationError.at(['type'], 'must be USER or INTERNAL');
        if (type === 'INTERNAL' && !isSystem(actor)) throw new ForbiddenError('only jobgate itself registers INTERNAL endpoints');
        if (input.handlerName?.startsWith('jobgate.') && !isSystem(actor)) {
          throw ValidationError.at(['handlerName'], 'names starting with "jobgate." are reserved for jobgate\'s own handlers');
        }
        if (input.kind === 'HTTP') assertTargetAllowed(ctx, input.url!);
        await assertRefs(trx, actor, input);
        // Checked first so the common refusal is a clean CONFLICT; the partial unique index decides races.
        if (await endpointsRepo.findEndpointByName(trx, actor.workspaceId, input.name)) {
          throw new ConflictError(`an endpoint named "${input.name}" already exists`, { name: input.name });
        }
        const row = await endpointsRepo.insertEndpoint(trx, {
          workspace_id: actor.workspaceId,
          name: input.name,
          description: input.description ?? null,
          kind: input.kind,
          type,
          url: input.kind === 'HTTP' ? input.url! : null,
          method: input.kind === 'HTTP' ? (input.method ?? 'POST') : null,
          headers: JSON.stringify(input.headers ?? {}),
          timeout_ms: input.timeoutMs ?? null,
          signing_secret: input.signingSecret ? ctx.seal(input.signingSecret, ['signingSecret']) : null,
          handler_name: input.kind === 'HANDLER' ? input.handlerName! : null,
          payload_spec_id: input.payloadSpecId ?? null,
          config_id: input.configId ?? null,
          max_attempts: input.maxAttempts ?? null,
          // Written, not left to the column defaults, so that what the schema checked is what is stored.
          backoff_base_ms: input.backoffBaseMs ?? DEFAULT_BACKOFF_BASE_MS,
          backoff_max_ms: input.backoffMaxMs ?? DEFAULT_BACKOFF_MAX_MS,
          ...(input.jitter != null ? { jitter: input.jitter } : {}),
          concurrency_limit: input.concurrencyLimit ?? null,
          default_priority: input.defaultPriority ?? 0,
          key_concurrency_limit: input.keyConcurrencyLimit ?? null,
          ...rateLimitColumns(input.rateLimit ?? null),
          ...keyRateLimitColumns(input.keyRateLimit ?? null),
          created_by_key_id: actor.keyId ?? null,
          aimed_by_key_id: actor.keyId ?? null,
        });
        return toEndpoint(row);
      }).catch((error: unknown) => {
        if (isPgError(error, UNIQUE_VIOLATION)) {
          throw new ConflictError(`an endpoint named "${(raw as { name?: string }).name}" already exists`, {
            name: (raw as { name?: string }).name,
          });
        }
        throw error;
      });
    },

    /**
     * Changes an endpoint. `payloadSpecId` / `configId`: null clears, absent leaves as is.
     * Throws NOT_FOUND, VALIDATION_FAILED, ARCHIVED, FORBIDDEN (INTERNAL endpoint; an OPERATOR
     * pointing it at, or changing the url or headers of one that uses, another key's config with secrets).
     */
    async updateEndpoint(actor: Actor, raw: UpdateEndpointInput): Promise<Endpoint> {
      return mutate(
        ctx,
        actor,
        { action: 'endpoint.update', role: 'OPERATOR', input: raw, target: { type: 'Endpoint', id: raw?.id } },
        async (trx) => {
          const input = parseInput(updateEndpointSchema, raw);
          const row = await endpointsRepo.findEndpointById(trx, actor.workspaceId, input.id, { forUpdate: true });
          if (!row) throw new NotFoundError('Endpoint', input.id);
          assertMutable(actor, row);
          const httpOnly = ['url', 'method', 'headers', 'signingSecret'] as const;
          if (row.kind === 'HANDLER') {
            for (const f of httpOnly) if (input[f] != null) throw ValidationError.at([f], 'is only for HTTP endpoints');
          } else if (input.handlerName != null) {
            throw ValidationError.at(['handlerName'], 'is only for HANDLER endpoints');
          }
          if (input.url === null) throw ValidationError.at(['url'], 'an HTTP endpoint needs a url');
          if (input.url != null) assertTargetAllowed(ctx, input.url);
          if (input.handlerName === null) throw ValidationError.at(['handlerName'], 'a HANDLER endpoint needs a handler name');
          if (input.handlerName?.startsWith('jobgate.') && !isSystem(actor)) {
            throw ValidationError.at(['handlerName'], 'names starting with "jobgate." are reserved for jobgate\'s own handlers');
          }
          const base = input.backoffBaseMs ?? row.backoff_base_ms;
          const max = input.backoffMaxMs ?? row.backoff_max_ms;
          if (max < base) {
            // Name the field that was given: the other is the stored value.
            if (input.backoffMaxMs == null)
              throw ValidationError.at(['backoffBaseMs'], `must be at most the endpoint's backoffMaxMs (${max})`);
            throw ValidationError.at(
              ['backoffMaxMs'],
              input.backoffBaseMs == null ? `must be at least the endpoint's backoffBaseMs (${base})` : 'must be at least backoffBaseMs',
            );
          }
          // A new url or new headers send the endpoint's config somewhere else: the config it keeps
          // is checked as if it were being pointed at now, or an OPERATOR whose endpoint an ADMIN
          // gave secrets could re-aim it and read them.
          const reaims = input.url != null || input.headers !== undefined;
          await assertRefs(trx, actor, {
            payloadSpecId: input.payloadSpecId,
            configId: input.configId !== undefined ? input.configId : reaims ? row.config_id : undefined,
          });

          const patch: EndpointPatch = {};
          if (input.description !== undefined) patch.description = input.description;
          if (input.url != null) patch.url = input.url;
          if (input.method != null) patch.method = input.method;
          if (input.headers !== undefined) patch.headers = JSON.stringify(input.headers ?? {});
          if (input.timeoutMs !== undefined) patch.timeout_ms = input.timeoutMs;
          if (input.signingSecret !== undefined) {
            patch.signing_secret = input.signingSecret === null ? null : ctx.seal(input.signingSecret, ['signingSecret']);
          }
          if (input.handlerName != null) patch.handler_name = input.handlerName;
          if (input.payloadSpecId !== undefined) patch.payload_spec_id = input.payloadSpecId;
          if (input.configId !== undefined) patch.config_id = input.configId;
          if (input.maxAttempts !== undefined) patch.max_attempts = input.maxAttempts;
          if (input.backoffBaseMs != null) patch.backoff_base_ms = input.backoffBaseMs;
          if (input.backoffMaxMs != null) patch.backoff_max_ms = input.backoffMaxMs;
          if (input.jitter != null) patch.jitter = input.jitter;
          if (input.concurrencyLimit !== undefined) patch.concurrency_limit = input.concurrencyLimit;
          if (input.defaultPriority !== undefined) patch.default_priority = input.defaultPriority ?? 0;
          if (input.keyConcurrencyLimit !== undefined) patch.key_concurrency_limit = input.keyConcurrencyLimit;
          if (input.rateLimit !== undefined) Object.assign(patch, rateLimitColumns(input.rateLimit));
          if (input.keyRateLimit !== undefined) Object.assign(patch, keyRateLimitColumns(input.keyRateLimit));
          // Where it sends is now this key's choice: its config's secrets go there only if this key
          // may send them (src/service/endpoints/config-secrets.ts), an ADMIN's update approving them.
          if (reaims || input.configId !== undefined) patch.aimed_by_key_id = actor.keyId ?? null;
          return toEndpoint(await endpointsRepo.updateEndpoint(trx, actor.workspaceId, row.id, patch));
        },
      );
    },

    /**
     * Archives an endpoint: it takes no new jobs and its name is free again. Idempotent.
     * Throws NOT_FOUND, FORBIDDEN (INTERNAL), CONFLICT (it still has jobs that are not retired).
     */
    async archiveEndpoint(actor: Actor, id: string): Promise<Endpoint> {
      return mutate(
        ctx,
        actor,
        { action: 'endpoint.archive', role: 'OPERATOR', input: { id }, target: { type: 'Endpoint', id } },
        async (trx) => {
          const row = await endpointsRepo.findEndpointById(trx, actor.workspaceId, id, { forUpdate: true });
          if (!row) throw new NotFoundError('Endpoint', id);
          if (row.archived_at) return toEndpoint(row);
          assertMutable(actor, row);
          const live = await jobsRepo.countLiveJobsOnEndpoint(trx, actor.workspaceId, row.id);
          if (live > 0) {
            throw new ConflictError(`endpoint "${row.name}" has ${live} job(s) that are not retired; cancel them first`, {
              liveJobs: live,
            });
          }
          return toEndpoint(await endpointsRepo.archiveEndpoint(trx, actor.workspaceId, row.id));
        },
      );
    },

    /**
     * Pauses an endpoint: none of its executions is claimed until it is resumed, by any worker or
     * gateway, across restarts; attempts already running finish, and new jobs are still accepted
     * (their executions wait, in order). Idempotent: pausing a paused endpoint keeps its pausedAt.
     * A claim that was already executing when the pause committed may still start what it took:
     * nothing is claimed after pauseEndpoint has returned. Throws NOT_FOUND, ARCHIVED, FORBIDDEN
     * (an INTERNAL endpoint; another key's endpoint for an OPERATOR).
     */
    async pauseEndpoint(actor: Actor, id: string): Promise<Endpoint> {
      return setPaused(actor, id, true);
    },

    /**
     * Resumes a paused endpoint: its due executions are claimable at once, in their order, within
     * its concurrency limit (a resume starts no more than the limits allow). Also lifts a hold its
     * target asked for with Retry-After. Idempotent. Throws
     * NOT_FOUND, ARCHIVED, FORBIDDEN.
     */
    async resumeEndpoint(actor: Actor, id: string): Promise<Endpoint> {
      return setPaused(actor, id, false);
    },

    /**
     * What the outbound policy would likely say of an endpoint's target now: its host name
     * resolves only to refused addresses, or does not resolve (waiting at most 2 s). Empty for a
     * HANDLER endpoint, an IP literal (refused at registration if refused at all) or a templated
     * host. Advice: each delivery checks the address it connects to. No database access.
     */
    async endpointTargetWarnings(_actor: Actor, endpoint: Pick<Endpoint, 'kind' | 'url'>): Promise<TargetWarning[]> {
      if (endpoint.kind !== 'HTTP' || !endpoint.url) return [];
      return targetWarnings(ctx.outbound, endpoint.url);
    },

    /**
     * The hold the endpoint's target asked for with a 429 or 503 and Retry-After, while it is in
     * force (none of the endpoint's executions starts before `until`); null when there is none.
     * The endpoints of one list are read together.
     */
    async retryAfterHold(actor: Actor, endpointId: string): Promise<{ until: Date; statusCode: number } | null> {
      const row = await holdOf(actor.workspaceId, endpointId);
      return row ? { until: row.until, statusCode: row.status_code } : null;
    },

    /**
     * The busiest concurrency keys of an endpoint that limits its keys (none for one that does not):
     * up to BUSIEST_KEYS, the most attempts in flight first, then the most waiting. Read for a
     * list's endpoints together.
     */
    async busiestKeys(actor: Actor, endpointId: string): Promise<{ key: string; running: number; pending: number }[]> {
      return (await keysOf(actor.workspaceId, endpointId)) ?? [];
    },

    /** One endpoint, by id (archived too) or by name (live only). Throws NOT_FOUND, VALIDATION_FAILED. */
    async endpoint(actor: Actor, rawRef: EndpointRef): Promise<Endpoint> {
      const ref = parseInput(endpointRefSchema, rawRef);
      if (!ref.id) return toEndpoint(await resolveEndpoint(db, actor, ref));
      const row = await endpointOf(actor.workspaceId, ref.id.toLowerCase());
      if (!row) throw new NotFoundError('Endpoint', ref.id);
      return toEndpoint(row);
    },

    async endpoints(
      actor: Actor,
      rawPage: PageInput = {},
      opts: { includeArchived?: boolean; includeInternal?: boolean } = {},
    ): Promise<Connection<Endpoint>> {
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const rows = await endpointsRepo.listEndpoints(db, actor.workspaceId, {
        limit: size + 1,
        afterId: page.after ? decodeCursor(page.after) : undefined,
        includeArchived: opts.includeArchived ?? false,
        includeInternal: opts.includeInternal ?? false,
      });
      return toConnection(rows, size, toEndpoint);
    },
  };
}
