/**
 * jobgate as an Apollo Federation v2 subgraph (Pothos' federation plugin): Job, Execution, Run
 * and Endpoint are entities keyed by `id` (src/resolvers/entities.ts), and the served schema has
 * the two root fields a router uses, `_service { sdl }` (the subgraph's SDL, with its `@key`s) and
 * `_entities(representations:)`.
 *
 * They are plumbing for routers, not API for clients: the checked-in schema.graphql (what codegen
 * types clients from, what the breaking-change policy guards, what the schema reference lists) is
 * the served schema without them (`withoutFederation`). A router learns the subgraph from
 * `_service`, which it asks with a key like any client.
 */
import { MapperKind, mapSchema } from '@graphql-tools/utils';
import { isUnionType, type GraphQLSchema } from 'graphql';
import { ValidationError } from '../service/kernel/errors.js';

/** The federation spec the subgraph links to; v2.6 is what Apollo and Hive routers both compose. */
export const FEDERATION_LINK = 'https://specs.apollo.dev/federation/v2.6';

/** The most references one `_entities` resolves: a page, as the largest page of a list. */
export const MAX_REFERENCES = 100;

const ROOT_FIELDS = new Set(['_entities', '_service']);
const TYPES = new Set(['_Any', '_Entity', '_Service']);

/**
 * Gives the federation plumbing descriptions (every type and field of the schema has one) and
 * returns the schema. The types come from @apollo/subgraph; only descriptions are set.
 */
export function describeFederation(schema: GraphQLSchema): GraphQLSchema {
  const fields = schema.getQueryType()?.getFields() ?? {};
  const entities = fields['_entities'];
  if (entities) {
    entities.description = `Federation: the entities a router asks for by key (\`{ __typename, id }\`), in order, at most ${MAX_REFERENCES} at once (more: VALIDATION_FAILED); null for an id that is no object of your workspace. A reference that is not \`{ __typename, id }\` of an entity type is VALIDATION_FAILED.`;
    // A page of references, as a list's page: the cost limit prices each one (src/server/hardening.ts).
    const resolve = entities.resolve;
    const entityUnion = schema.getType('_Entity');
    const entityTypes = new Set(entityUnion && isUnionType(entityUnion) ? entityUnion.getTypes().map((t) => t.name) : []);
    entities.resolve = (source, args: { representations?: unknown[] }, context, info) => {
      const n = args.representations?.length ?? 0;
      if (n > MAX_REFERENCES)
        throw ValidationError.at(['representations'], `at most ${MAX_REFERENCES} references at once (got ${n}): split them`);
      // A reference the plugin cannot read failed as an unexpected error with its stack logged.
      args.representations?.forEach((ref, i) => {
        const problem = referenceProblem(ref, entityTypes);
        if (problem) throw ValidationError.at(['representations', i], problem);
      });
      return resolve?.(source, args, context, info);
    };
    for (const arg of entities.args) arg.description = 'The references: each `{ __typename, id }` of a Job, Execution, Run or Endpoint.';
  }
  if (fields['_service'])
    fields['_service'].description = "Federation: this subgraph's SDL, with its entity keys, for a router to compose.";
  const describe: Record<string, string> = {
    _Any: 'Federation: an entity reference, `{ __typename, id }`.',
    _Entity: 'Federation: the types a router can resolve here by key.',
    _Service: 'Federation: what this subgraph says about itself.',
  };
  for (const [name, description] of Object.entries(describe)) {
    const type = schema.getType(name);
    if (type) type.description = description;
  }
  const service = schema.getType('_Service');
  if (service && 'getFields' in service) {
    const sdl = service.getFields()['sdl'];
    if (sdl) sdl.description = 'The SDL, as federation prints it (with `@link` and `@key`).';
  }
  return schema;
}

/** Why `ref` is not a reference to one of `types` by id, if it is not. */
function referenceProblem(ref: unknown, types: Set<string>): string | undefined {
  if (typeof ref !== 'object' || ref === null || Array.isArray(ref)) return 'must be an object `{ __typename, id }`';
  const { __typename: typename, id } = ref as Record<string, unknown>;
  if (typeof typename !== 'string' || !types.has(typename)) return `__typename must be one of ${[...types].join(', ')}`;
  if (typeof id !== 'string') return 'id must be a string';
  return undefined;
}

/** The served schema without the federation plumbing: the public API of schema.graphql. */
export function withoutFederation(schema: GraphQLSchema): GraphQLSchema {
  return mapSchema(schema, {
    [MapperKind.QUERY_ROOT_FIELD]: (field, name) => (ROOT_FIELDS.has(name) ? null : field),
    [MapperKind.TYPE]: (type) => (TYPES.has(type.name) ? null : type),
  });
}
