/**
 * Objects by id alone, for Relay's `node(id:)`: the workspace's own, never another's (an id of
 * another workspace is null, as an id of nothing is).
 */
import { tableHolding, type NodeTable } from '../db/repositories/nodes.js';
import type { Actor } from './kernel/actor.js';
import type { ServiceContext } from './kernel/context.js';
import { NotFoundError } from './kernel/errors.js';

export type NodeKind =
  'Workspace' | 'Job' | 'Execution' | 'Endpoint' | 'PayloadSpec' | 'Config' | 'Run' | 'ApiKey' | 'AuditEntry' | 'Finding' | 'Batch';

const KIND_OF: Record<NodeTable, NodeKind> = {
  jobs: 'Job',
  executions: 'Execution',
  endpoints: 'Endpoint',
  payload_specs: 'PayloadSpec',
  configs: 'Config',
  runs: 'Run',
  api_keys: 'ApiKey',
  batches: 'Batch',
};

/** The shape of a sealed id (an audit entry's or a finding's: ./kernel/cursors.ts). */
const SEALED_ID = /^[A-Za-z0-9_-]{22}$/;

interface Getters {
  workspace(actor: Actor): Promise<{ id: string }>;
  job(actor: Actor, id: string): Promise<object>;
  execution(actor: Actor, id: string): Promise<object>;
  endpoint(actor: Actor, ref: { id: string }): Promise<object>;
  payloadSpec(actor: Actor, id: string): Promise<object>;
  config(actor: Actor, id: string): Promise<object>;
  run(actor: Actor, id: string): Promise<object>;
  apiKey(actor: Actor, id: string): Promise<object>;
  auditEntry(actor: Actor, id: string): Promise<object>;
  finding(actor: Actor, id: string): Promise<object>;
  batch(actor: Actor, id: string): Promise<object>;
}

export function createNodeService(ctx: ServiceContext, get: Getters) {
  return {
    /**
     * The object with this id in the actor's workspace, and its kind; null when there is none.
     * An API key or an audit entry needs the ADMIN role, as their lists do (FORBIDDEN).
     */
    async node(actor: Actor, id: string): Promise<{ kind: NodeKind; value: object } | null> {
      if (id === actor.workspaceId) return { kind: 'Workspace', value: await get.workspace(actor) };
      if (SEALED_ID.test(id)) {
        // Sealed with the workspace's key and a kind byte, so at most one of these opens it.
        const kinds = actor.role === 'ADMIN' ? (['AuditEntry', 'Finding'] as const) : (['Finding'] as const);
        for (const kind of kinds) {
          const value = await (kind === 'AuditEntry' ? get.auditEntry(actor, id) : get.finding(actor, id)).catch((error: unknown) => {
            if (error instanceof NotFoundError) return null;
            throw error;
          });
          if (value) return { kind, value };
        }
        return null;
      }
      const table = await tableHolding(ctx.db, actor.workspaceId, id);
      if (!table) return null;
      const kind = KIND_OF[table];
      const value =
        kind === 'Job'
          ? await get.job(actor, id)
          : kind === 'Execution'
            ? await get.execution(actor, id)
            : kind === 'Endpoint'
              ? await get.endpoint(actor, { id })
              : kind === 'PayloadSpec'
                ? await get.payloadSpec(actor, id)
                : kind === 'Config'
                  ? await get.config(actor, id)
                  : kind === 'ApiKey'
                    ? await get.apiKey(actor, id)
                    : kind === 'Batch'
                      ? await get.batch(actor, id)
                      : await get.run(actor, id);
      return { kind, value };
    },
  };
}
