/**
 * JSON-typed output fields: their values travel boxed, from the resolver to the response's text.
 *
 * GraphQL execution treats any object with a `then` property as a promise (yoga's executor tests
 * `value?.then != null`), and it tests twice: what a resolver returns, and what the scalar's
 * serialize made of it. A job input, payload spec (JSON Schema's own `if`/`then`), finding detail
 * or any stored JSON whose top level has a `then` key therefore failed its field, and with a
 * non-null field, the whole answer. So a JSON field's resolver returns the value boxed, the JSON
 * scalar keeps the box, and the box writes itself as its value when the result is stringified
 * (`toJSON`): every transport jobgate serves (HTTP, SSE, graphql-ws) sends the result through
 * JSON.stringify. An in-process `execute` sees the boxes; `JsonOutput.unwrap` reads them.
 * Done once, over the built schema, so a JSON field added later is covered without anyone
 * remembering to.
 */
import { defaultFieldResolver, getNamedType, getNullableType, isInterfaceType, isListType, isObjectType } from 'graphql';
import type { GraphQLField, GraphQLFieldResolver, GraphQLSchema } from 'graphql';

/** A JSON value on its way from a resolver to the JSON scalar's serialize. */
export class JsonOutput {
  constructor(readonly value: unknown) {}

  /** What JSON.stringify writes in the box's place: the value, whatever its keys. */
  toJSON(): unknown {
    return this.value;
  }

  /** The value itself, boxed or not. */
  static unwrap(value: unknown): unknown {
    return value instanceof JsonOutput ? value.value : value;
  }
}

function box(value: unknown): unknown {
  return value === null || value === undefined ? value : new JsonOutput(value);
}

function boxItems(value: unknown): unknown {
  return Array.isArray(value) ? value.map(box) : value;
}

// A stored JSON value never holds a function, so a `then` that is a function marks a real
// promise (what an async resolver returns), never a JSON object that merely has the key.
function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}

function boxed(field: GraphQLField<unknown, unknown>): GraphQLFieldResolver<unknown, unknown> {
  const resolve = field.resolve ?? defaultFieldResolver;
  const wrap = isListType(getNullableType(field.type)) ? boxItems : box;
  return (source, args, context, info) => {
    const result = resolve(source, args, context, info);
    return isPromiseLike(result) ? Promise.resolve(result).then(wrap) : wrap(result);
  };
}

/** Makes every field whose type is JSON (or a list of it) hand its value to the scalar boxed. */
export function boxJsonOutputs(schema: GraphQLSchema, scalarName = 'JSON'): GraphQLSchema {
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) && !isInterfaceType(type)) continue;
    for (const field of Object.values(type.getFields())) {
      if (getNamedType(field.type).name === scalarName) field.resolve = boxed(field);
    }
  }
  return schema;
}
