/**
 * Every GraphQL document the console sends (the codegen's output from its screens) passes the
 * gateway's real validation: depth, aliases, tokens and the cost limit, lists priced at the
 * largest page a variable may ask for. A screen whose own query the gateway refuses shows an
 * error on every load, whatever the data: found only by someone opening that screen.
 *
 * Each document is sent as the console sends it, to the gateway's yoga (its real hardening),
 * with made-up variable values; a document that passes validation and then fails on them (an
 * unknown id) is fine here: only a refusal of the document itself fails the test.
 */
import { GraphQLEnumType, GraphQLInputObjectType, Kind, parse, type TypeNode } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../../src/schema/index.js';
import { createTestDb, type TestDb } from '../../test/support/db.js';
import { createTestGateway, type TestGateway } from '../../test/support/graphql.js';
import * as generated from '../src/gql/graphql.ts';

let t: TestDb;
let g: TestGateway;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
});
afterAll(async () => {
  await g.close();
  await t.close();
});

const documents: [string, string][] = Object.entries(generated as Record<string, unknown>)
  .filter(([name, value]) => name.endsWith('Document') && value instanceof generated.TypedDocumentString)
  .map(([name, value]) => [name, String(value)]);

/** The largest page a list serves: a variable page size is priced at this. */
const LARGEST_PAGE = 100;

function sample(type: TypeNode, name: string): unknown {
  if (type.kind === Kind.NON_NULL_TYPE) return sample(type.type, name);
  if (type.kind === Kind.LIST_TYPE) return [sample(type.type, name)];
  const named = type.name.value;
  if (named === 'Int') return /first|last|limit|count|size/i.test(name) ? LARGEST_PAGE : 1;
  if (named === 'ID') return '00000000-0000-4000-8000-000000000000';
  if (named === 'String') return 'x';
  if (named === 'Boolean') return false;
  if (named === 'DateTime') return new Date(0).toISOString();
  if (named === 'JSON') return {};
  const schemaType = schema.getType(named);
  if (schemaType instanceof GraphQLEnumType) return schemaType.getValues()[0]?.value;
  if (schemaType instanceof GraphQLInputObjectType) return {};
  return null;
}

describe("the console's documents", () => {
  it('are all found (the screens send some)', () => {
    expect(documents.length).toBeGreaterThan(20);
    expect(documents.map(([name]) => name)).toContain('HandlersDocument');
  });

  it.each(documents)('%s passes the gateway’s validation at the largest pages', async (_name, text) => {
    const operation = parse(text).definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION);
    const variables = Object.fromEntries(
      (operation?.kind === Kind.OPERATION_DEFINITION ? (operation.variableDefinitions ?? []) : []).map((v) => [
        v.variable.name.value,
        sample(v.type, v.variable.name.value),
      ]),
    );
    const result = await g.gql(text, variables);
    const refusals = (result.errors ?? []).filter(
      (e) =>
        e.extensions?.code === 'GRAPHQL_VALIDATION_FAILED' ||
        e.extensions?.code === 'GRAPHQL_PARSE_FAILED' ||
        /cost|depth|token|alias/i.test(e.message),
    );
    expect(refusals).toEqual([]);
  });
});
