/**
 * Typed job definitions (the library's defineJob): an in-process handler's HANDLER endpoint
 * (named after it) and the payload spec of its input (named the same, its JSON Schema generated
 * from the handler's zod schema), made to match the definition. Defining is convergent: what is
 * missing is created, what differs is updated (a new schema is a new spec version), the rest is
 * left as it is, so every replica can define its jobs at start-up. The spec makes GraphQL's
 * createJob on the endpoint refuse what the library's typed enqueue would.
 */
import { z } from 'zod';
import * as endpointsRepo from '../../db/repositories/endpoints.js';
import * as specsRepo from '../../db/repositories/payload-specs.js';
import type { Actor } from '../kernel/actor.js';
import { mutate } from '../kernel/audited-mutation.js';
import { canonicalJson } from '../kernel/canonical-json.js';
import { parseInput, type ServiceContext } from '../kernel/context.js';
import { ConflictError, ValidationError } from '../kernel/errors.js';
import { ENDPOINT_NAME, jsonSchemaDocument, text } from '../kernel/inputs.js';
import { toEndpoint, toPayloadSpec, type Endpoint, type PayloadSpec } from '../kernel/models.js';
import { assertValidJsonSchema } from './json-schema.js';

export const defineJobSchema = z.object({
  /** The handler's name, which is its endpoint's and its payload spec's. */
  name: text().min(1).max(200).regex(ENDPOINT_NAME, 'must be dotted lowercase words (it names its endpoint), e.g. "billing.send-invoice"'),
  /** The JSON Schema (draft-07) job input must satisfy. */
  jsonSchema: jsonSchemaDocument,
  description: text().max(2000).nullish(),
  /** The endpoint's max attempts; absent: the installation's default. */
  maxAttempts: z.number().int().min(1).max(100).nullish(),
});
export type DefineJobInput = z.input<typeof defineJobSchema>;

export interface DefinedJob {
  endpoint: Endpoint;
  payloadSpec: PayloadSpec;
  /** CREATED (the endpoint was made), UPDATED (its spec or settings changed) or UNCHANGED. */
  outcome: 'CREATED' | 'UPDATED' | 'UNCHANGED';
}

export function createJobDefinitionsService(ctx: ServiceContext) {
  return {
    /**
     * Makes the HANDLER endpoint `name` (handler `name`) and its payload spec `name` match the
     * definition, in one transaction, audited. Throws VALIDATION_FAILED (a bad name or schema),
     * CONFLICT (an endpoint of that name that is not this handler's), FORBIDDEN (below OPERATOR).
     */
    async defineJob(actor: Actor, raw: DefineJobInput): Promise<DefinedJob> {
      const target = (r: DefinedJob) => ({ type: 'Endpoint', id: r.endpoint.id });
      return mutate(ctx, actor, { action: 'job.define', role: 'OPERATOR', input: raw, target }, async (trx) => {
        const input = parseInput(defineJobSchema, raw);
        if (input.name.startsWith('jobgate.')) throw ValidationError.at(['name'], 'names starting with "jobgate." are reserved');
        assertValidJsonSchema(input.jsonSchema, ['jsonSchema']);
        const ws = actor.workspaceId;
        await specsRepo.lockJobDefinition(trx, ws, input.name);
        let changed = false;
        let spec = await specsRepo.findPayloadSpecByNameForUpdate(trx, ws, input.name);
        if (!spec) {
          spec = await specsRepo.insertPayloadSpec(trx, ws, {
            name: input.name,
            description: `The input of job "${input.name}", generated from its handler's schema.`,
            jsonSchema: input.jsonSchema,
            createdByKeyId: actor.keyId ?? null,
          });
          if (!spec) throw new ConflictError(`a payload spec named "${input.name}" was created concurrently; define it again`);
          changed = true;
        } else if (canonicalJson(spec.json_schema) !== canonicalJson(input.jsonSchema)) {
          spec = (await specsRepo.updatePayloadSpec(trx, ws, spec.id, { jsonSchema: input.jsonSchema }))!;
          changed = true;
        }
        // What the definition says; a setting it leaves out is left as an operator set it.
        const wanted = {
          payload_spec_id: spec.id,
          ...(input.description != null ? { description: input.description } : {}),
          ...(input.maxAttempts != null ? { max_attempts: input.maxAttempts } : {}),
        };
        const found = await endpointsRepo.findEndpointByName(trx, ws, input.name);
        if (!found) {
          const row = await endpointsRepo.insertEndpoint(trx, {
            workspace_id: ws,
            name: input.name,
            kind: 'HANDLER',
            type: 'USER',
            url: null,
            method: null,
            headers: '{}',
            timeout_ms: null,
            signing_secret: null,
            handler_name: input.name,
            config_id: null,
            concurrency_limit: null,
            created_by_key_id: actor.keyId ?? null,
            description: null,
            max_attempts: null,
            ...wanted,
          });
          return { endpoint: toEndpoint(row), payloadSpec: toPayloadSpec(spec), outcome: 'CREATED' as const };
        }
        if (found.kind !== 'HANDLER' || found.handler_name !== input.name)
          throw new ConflictError(`endpoint "${input.name}" exists and is not the HANDLER endpoint of handler "${input.name}"`, {
            name: input.name,
          });
        const differs = (Object.keys(wanted) as (keyof typeof wanted)[]).some((k) => found[k] !== wanted[k]);
        const row = differs ? await endpointsRepo.updateEndpoint(trx, ws, found.id, wanted) : found;
        return { endpoint: toEndpoint(row), payloadSpec: toPayloadSpec(spec), outcome: changed || differs ? 'UPDATED' : 'UNCHANGED' };
      });
    },
  };
}
