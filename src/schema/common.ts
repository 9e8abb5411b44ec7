/**
 * Scalars, and the connection, node-id and page-argument helpers shared by every area.
 */
import { GraphQLError, Kind, type ValueNode } from 'graphql';
import type { ObjectRef } from '@pothos/core';
import type { ZodType } from 'zod';
import { isInstantProblem, parseInstant } from '../service/kernel/instant.js';
import { COUNT_LIMIT } from '../service/kernel/pagination.js';
import { builder } from './builder.js';
import { JsonOutput } from './json-output.js';

/** A refused value is named in the error, up to a length. */
const clip = (value: string) => (value.length > 64 ? `${value.slice(0, 64)}…` : value);

function parseDateTime(value: string): Date {
  const instant = parseInstant(value);
  if (isInstantProblem(instant)) throw new GraphQLError(`DateTime "${clip(value)}" is not an RFC 3339 date-time: it ${instant.problem}`);
  return instant;
}

export const DateTimeScalar = builder.scalarType('DateTime', {
  specifiedByURL: 'https://www.rfc-editor.org/rfc/rfc3339#section-5.6',
  description:
    'An instant, as an RFC 3339 (ISO-8601) string with seconds and a time zone offset, e.g. "2026-12-01T09:30:00.000Z" or "2026-12-01T10:30:00+01:00"; years 0001-9999; digits past the millisecond are dropped. A string without an offset or seconds, or naming a day that does not exist, is refused.',
  serialize: (value) => {
    if (value instanceof Date) return value.toISOString();
    throw new GraphQLError('DateTime cannot represent a non-Date value');
  },
  parseValue: (value) => {
    if (typeof value !== 'string') throw new GraphQLError('DateTime must be an RFC 3339 string');
    return parseDateTime(value);
  },
  parseLiteral: (ast) => {
    if (ast.kind !== Kind.STRING) throw new GraphQLError('DateTime must be an RFC 3339 string');
    return parseDateTime(ast.value);
  },
});

function literalToJson(ast: ValueNode, variables?: Record<string, unknown> | null): unknown {
  switch (ast.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return ast.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(ast.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return ast.values.map((v) => literalToJson(v, variables));
    case Kind.OBJECT:
      return Object.fromEntries(ast.fields.map((f) => [f.name.value, literalToJson(f.value, variables)]));
    case Kind.VARIABLE:
      return variables?.[ast.name.value];
    default:
      throw new GraphQLError('JSON literal is not a JSON value');
  }
}

export const JSONScalar = builder.scalarType('JSON', {
  description: 'Any JSON value: object, array, string, number, boolean or null.',
  // Boxed (json-output.ts), so no executor takes a value with a `then` key for a promise.
  serialize: (value) => (value instanceof JsonOutput ? value : new JsonOutput(value)),
  parseValue: (value) => value,
  parseLiteral: (ast, variables) => literalToJson(ast, variables),
});

export const ListOrderEnum = builder.enumType('ListOrder', {
  description: 'The order of a list, by creation time.',
  values: {
    NEWEST_FIRST: { description: 'Newest first (default).' },
    OLDEST_FIRST: { description: 'Oldest first.' },
  } as const,
});

/**
 * Defines `<Name>Connection` and `<Name>Edge` over a node type, with the relay plugin: edges,
 * nodes and pageInfo come from it (their wording is in ./builder.ts), the counts are ours. A list
 * field returns the service's page as it is (`Connection` in ../service/kernel/pagination.ts), so
 * its keyset cursors are the ones clients see; list fields take `pageArgs`, not the plugin's
 * `t.connection` arguments (no `last`/`before`: lists are read forwards only).
 */
export function connectionOf<T>(name: string, node: ObjectRef<any, T>, what: string, order = 'newest first') {
  return builder.connectionObject(
    {
      name: `${name}Connection`,
      type: node,
      description: `A page of ${what}s, ${order}.`,
      fields: (t) => ({
        totalCount: t.int({
          nullable: true,
          description:
            `How many ${what}s the whole list holds (with its filters), counted only when asked for, up to ${COUNT_LIMIT}: ` +
            `past that it reads ${COUNT_LIMIT} and totalCountCapped is true. null for a list that is not counted.`,
          resolve: (c) => c.count?.() ?? null,
        }),
        totalCountCapped: t.boolean({
          nullable: true,
          description: `Whether totalCount stopped at its bound of ${COUNT_LIMIT} (the list holds at least that many). null when not counted.`,
          resolve: async (c) => (c.count ? (await c.count()) >= COUNT_LIMIT : null),
        }),
      }),
    },
    {
      name: `${name}Edge`,
      description: `One ${what} in a page, with its cursor.`,
      nodeField: { description: `The ${what}.` },
    },
  );
}

/**
 * The largest value a GraphQL Int holds (32 bits), about 24.8 days in milliseconds. A duration
 * past it (a job that ran a month late, a retry driven weeks after its failure) is given as this
 * cap: graphql-js refuses the whole field otherwise, and an error there emptied the console's
 * overview. The fields that can reach it say so.
 */
const GRAPHQL_INT_MAX = 2_147_483_647;
export const CAPPED_MS_NOTE = ' Capped at 2147483647 (about 24.8 days).';
export const cappedMs = (ms: number | null | undefined): number | null => (ms == null ? null : Math.min(ms, GRAPHQL_INT_MAX));

/** The `id` of a `Node` type (`builder.nodeRef(name, { id: nodeId() })`): the row's own id. */
export function nodeId(description = 'Stable identifier.') {
  return { description, resolve: (value: { id: string }) => value.id };
}

/** Attaches a service zod schema to a GraphQL argument, so both reject the same input the same way. */
export function zodInput(schema: ZodType): { schema: ZodType<any> } {
  return { schema: schema as ZodType<any> };
}

type ArgBuilder = Parameters<Parameters<typeof builder.queryField>[1]>[0]['arg'];

/** `first` and `after`, the arguments of every list. */
export function pageArgs(arg: ArgBuilder) {
  return {
    first: arg.int({ description: 'How many items to return, from 1 to 100. Default 20.' }),
    after: arg.string({ description: 'Return the items after this cursor (`pageInfo.endCursor` of the previous page).' }),
  };
}
