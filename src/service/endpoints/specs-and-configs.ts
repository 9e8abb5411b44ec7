/**
 * Workspaces, payload specs and configs: the things endpoints refer to.
 */
import * as configsRepo from '../../db/repositories/configs.js';
import * as specsRepo from '../../db/repositories/payload-specs.js';
import * as workspacesRepo from '../../db/repositories/workspaces.js';
import type { Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { batchedRead, byId } from '../kernel/batched-reads.js';
import { requireOwnership } from '../kernel/authorisation.js';
import { assertNoOthersAimAt } from './config-secrets.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { ConflictError, NotFoundError } from '../kernel/errors.js';
import {
  createPayloadSpecSchema,
  pageSchema,
  setConfigSchema,
  updatePayloadSpecSchema,
  type CreatePayloadSpecInput,
  type PageInput,
  type SetConfigInput,
  type UpdatePayloadSpecInput,
} from '../kernel/inputs.js';
import { assertValidJsonSchema } from './json-schema.js';
import { toConfig, toPayloadSpec, toWorkspace, type Config, type PayloadSpec, type Workspace } from '../kernel/models.js';
import { decodeCursor, pageSize, toConnection, type Connection } from '../kernel/pagination.js';

// eslint-disable-next-line max-lines-per-function -- an area factory: short methods sharing one context, its length theirs added up
export function createCatalogService(ctx: ServiceContext) {
  const { db } = ctx;
  // A page of endpoints reads their specs and configs together (../kernel/batched-reads.ts).
  const specById = batchedRead((ws, ids) => specsRepo.findPayloadSpecsByIds(db, ws, ids).then(byId), !ctx.outer);
  const configById = batchedRead((ws, ids) => configsRepo.findConfigsByIds(db, ws, ids).then(byId), !ctx.outer);

  return {
    /** The actor's workspace. */
    async workspace(actor: Actor): Promise<Workspace> {
      const row = await workspacesRepo.findWorkspaceById(db, actor.workspaceId);
      if (!row) throw new NotFoundError('Workspace', actor.workspaceId);
      return toWorkspace(row);
    },

    /**
     * Creates a payload spec. The document must itself be a valid JSON Schema.
     * Throws VALIDATION_FAILED (bad schema), CONFLICT (name taken in the workspace).
     */
    async createPayloadSpec(actor: Actor, raw: CreatePayloadSpecInput): Promise<PayloadSpec> {
      return mutate(
        ctx,
        actor,
        { action: 'payloadSpec.create', role: 'OPERATOR', input: raw, target: (r: PayloadSpec) => ({ type: 'PayloadSpec', id: r.id }) },
        async (trx) => {
          const input = parseInput(createPayloadSpecSchema, raw);
          assertValidJsonSchema(input.jsonSchema, ['jsonSchema']);
          const row = await specsRepo.insertPayloadSpec(trx, actor.workspaceId, {
            name: input.name,
            description: input.description ?? null,
            jsonSchema: input.jsonSchema,
            createdByKeyId: actor.keyId ?? null,
          });
          if (!row) throw new ConflictError(`a payload spec named "${input.name}" already exists`, { name: input.name });
          return toPayloadSpec(row);
        },
      );
    },

    /**
     * Replaces a payload spec's schema and/or description; a new schema bumps `version`.
     * Jobs already created keep the input they were validated with. Throws NOT_FOUND, VALIDATION_FAILED.
     */
    async updatePayloadSpec(actor: Actor, raw: UpdatePayloadSpecInput): Promise<PayloadSpec> {
      return mutate(
        ctx,
        actor,
        { action: 'payloadSpec.update', role: 'OPERATOR', input: raw, target: { type: 'PayloadSpec', id: raw?.id } },
        async (trx) => {
          const input = parseInput(updatePayloadSpecSchema, raw);
          if (input.jsonSchema != null) assertValidJsonSchema(input.jsonSchema, ['jsonSchema']);
          const current = await specsRepo.findPayloadSpecById(trx, actor.workspaceId, input.id);
          if (!current) throw new NotFoundError('PayloadSpec', input.id);
          requireOwnership(actor, current.created_by_key_id, `payload spec "${current.name}"`);
          const row = await specsRepo.updatePayloadSpec(trx, actor.workspaceId, input.id, {
            ...(input.description !== undefined ? { description: input.description } : {}),
            ...(input.jsonSchema != null ? { jsonSchema: input.jsonSchema } : {}),
          });
          if (!row) throw new NotFoundError('PayloadSpec', input.id);
          return toPayloadSpec(row);
        },
      );
    },

    async payloadSpec(actor: Actor, id: string): Promise<PayloadSpec> {
      const row = await specById(actor.workspaceId, id.toLowerCase());
      if (!row) throw new NotFoundError('PayloadSpec', id);
      return toPayloadSpec(row);
    },

    async payloadSpecs(actor: Actor, rawPage: PageInput = {}): Promise<Connection<PayloadSpec>> {
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const rows = await specsRepo.listPayloadSpecs(db, actor.workspaceId, {
        limit: size + 1,
        afterId: page.after ? decodeCursor(page.after) : undefined,
      });
      return toConnection(rows, size, toPayloadSpec);
    },

    /**
     * Creates or replaces the named config with exactly these entries. Secret entries are
     * stored but never returned. Throws VALIDATION_FAILED.
     */
    async setConfig(actor: Actor, raw: SetConfigInput): Promise<Config> {
      return mutate(
        ctx,
        actor,
        { action: 'config.set', role: 'OPERATOR', input: raw, target: (r: Config) => ({ type: 'Config', id: r.id }) },
        async (trx) => {
          const input = parseInput(setConfigSchema, raw);
          const entries = Object.fromEntries(
            input.entries.map((e, i) => [
              e.key,
              e.secret
                ? { value: ctx.seal(e.value, ['entries', i, 'value']), secret: true, setBy: actor.keyId ?? null }
                : { value: e.value, secret: false },
            ]),
          );
          const existing = await configsRepo.findConfigByName(trx, actor.workspaceId, input.name);
          if (existing) requireOwnership(actor, existing.created_by_key_id, `config "${existing.name}"`);
          const row = await configsRepo.upsertConfig(
            trx,
            actor.workspaceId,
            input.name,
            entries,
            existing ? existing.created_by_key_id : (actor.keyId ?? null),
          );
          await assertNoOthersAimAt(trx, actor, row);
          return toConfig(row);
        },
      );
    },

    async config(actor: Actor, id: string): Promise<Config> {
      const row = await configById(actor.workspaceId, id.toLowerCase());
      if (!row) throw new NotFoundError('Config', id);
      return toConfig(row);
    },

    async configs(actor: Actor, rawPage: PageInput = {}): Promise<Connection<Config>> {
      const page = parseInput(pageSchema, rawPage);
      const size = pageSize(page);
      const rows = await configsRepo.listConfigs(db, actor.workspaceId, {
        limit: size + 1,
        afterId: page.after ? decodeCursor(page.after) : undefined,
      });
      return toConnection(rows, size, toConfig);
    },
  };
}
