/**
 * The schema reference, docs/schema-reference.md, generated from schema.graphql: every root field
 * (queries, mutations, subscriptions) with its arguments and descriptions, then every type.
 *
 *   write    rewrites docs/schema-reference.md
 *   check    fails when it is stale (part of `npm run check`)
 *
 * It reads the checked-in schema.graphql (which `npm run schema:check` holds to the code), so the
 * two checks together keep the reference to the code.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  buildSchema,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  isScalarType,
  isUnionType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputField,
  type GraphQLNamedType,
  type GraphQLSchema,
} from 'graphql';

const SCHEMA = fileURLToPath(new URL('../schema.graphql', import.meta.url));
const REFERENCE = fileURLToPath(new URL('../docs/schema-reference.md', import.meta.url));

const BUILT_IN = ['String', 'Int', 'Float', 'Boolean', 'ID'];

/** One line of markdown from a description (a table cell holds no newline or bar). */
const cell = (text: string | null | undefined) =>
  (text ?? '')
    .replace(/\s*\n\s*/g, ' ')
    .replace(/\|/g, '\\|')
    .trim();
/** A type's anchor: `type-` and its name, apart from the root fields' headings (`job` the query, `Job` the type). */
const anchor = (name: string) => `type-${name.toLowerCase()}`;
/** A type reference, linked to its section when it is one of ours. */
function typeRef(type: { toString(): string }, schema: GraphQLSchema): string {
  const text = type.toString();
  const named = text.replace(/[[\]!]/g, '');
  const t = schema.getType(named);
  return t && !named.startsWith('__') && !BUILT_IN.includes(named) ? `[\`${text}\`](#${anchor(named)})` : `\`${text}\``;
}
const deprecation = (reason: string | null | undefined) => (reason ? ` **Deprecated:** ${cell(reason)}` : '');

function argumentList(args: readonly GraphQLArgument[], schema: GraphQLSchema): string[] {
  if (args.length === 0) return [];
  const lines = ['', '| Argument | Type | Description |', '| --- | --- | --- |'];
  for (const a of args) {
    const dflt = a.defaultValue !== undefined ? ` Default: \`${JSON.stringify(a.defaultValue)}\`.` : '';
    lines.push(`| \`${a.name}\` | ${typeRef(a.type, schema)} | ${cell(a.description)}${dflt}${deprecation(a.deprecationReason)} |`);
  }
  return lines;
}

function rootFields(title: string, fields: readonly GraphQLField<unknown, unknown>[], schema: GraphQLSchema): string[] {
  const lines = [`## ${title}`, ''];
  for (const f of fields) {
    lines.push(`### \`${f.name}\``, '', `Returns ${typeRef(f.type, schema)}.${deprecation(f.deprecationReason)}`);
    if (f.description) lines.push('', cell(f.description));
    lines.push(...argumentList(f.args, schema), '');
  }
  return lines;
}

function fieldTable(fields: readonly (GraphQLField<unknown, unknown> | GraphQLInputField)[], schema: GraphQLSchema): string[] {
  const lines = ['| Field | Type | Description |', '| --- | --- | --- |'];
  for (const f of fields) {
    const args = 'args' in f && f.args.length ? ` Arguments: ${f.args.map((a) => `\`${a.name}: ${a.type.toString()}\``).join(', ')}.` : '';
    lines.push(`| \`${f.name}\` | ${typeRef(f.type, schema)} | ${cell(f.description)}${args}${deprecation(f.deprecationReason)} |`);
  }
  return lines;
}

function typeSection(type: GraphQLNamedType, schema: GraphQLSchema): string[] {
  const kind = isObjectType(type)
    ? 'object'
    : isInterfaceType(type)
      ? 'interface'
      : isUnionType(type)
        ? 'union'
        : isEnumType(type)
          ? 'enum'
          : isInputObjectType(type)
            ? 'input'
            : 'scalar';
  const lines = [
    `<a id="${anchor(type.name)}"></a>`,
    '',
    `### ${type.name}`,
    '',
    `*${kind}*${type.description ? ` — ${cell(type.description)}` : ''}`,
    '',
  ];
  if (isObjectType(type) || isInterfaceType(type)) {
    const interfaces = type.getInterfaces();
    if (interfaces.length) lines.push(`Implements ${interfaces.map((i) => typeRef(i, schema)).join(', ')}.`, '');
    lines.push(...fieldTable(Object.values(type.getFields()), schema));
  } else if (isInputObjectType(type)) {
    lines.push(...fieldTable(Object.values(type.getFields()), schema));
  } else if (isUnionType(type)) {
    lines.push(
      `One of ${type
        .getTypes()
        .map((t) => typeRef(t, schema))
        .join(', ')}.`,
    );
  } else if (isEnumType(type)) {
    lines.push('| Value | Description |', '| --- | --- |');
    for (const v of type.getValues()) lines.push(`| \`${v.name}\` | ${cell(v.description)}${deprecation(v.deprecationReason)} |`);
  }
  lines.push('');
  return lines;
}

/** The reference for an SDL. */
export function schemaReference(sdl: string): string {
  const schema = buildSchema(sdl);
  const roots = [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()];
  const lines = [
    '# Schema reference',
    '',
    '<!-- Generated from schema.graphql by scripts/schema-reference.ts (`npm run docs:schema`); do not edit. -->',
    '',
    'Every operation and type of the GraphQL API, with the descriptions GraphiQL shows. How to use them',
    'by task: [the API by task](api-by-task.md).',
    '',
  ];
  const [query, mutation, subscription] = roots;
  if (query) lines.push(...rootFields('Queries', Object.values(query.getFields()), schema));
  if (mutation) lines.push(...rootFields('Mutations', Object.values(mutation.getFields()), schema));
  if (subscription) lines.push(...rootFields('Subscriptions', Object.values(subscription.getFields()), schema));
  lines.push('## Types', '');
  const types = Object.values(schema.getTypeMap())
    .filter((t) => !t.name.startsWith('__') && !roots.includes(t as never))
    .filter((t) => !(isScalarType(t) && BUILT_IN.includes(t.name)))
    .sort((a, b) => a.name.localeCompare(b.name));
  for (const t of types) lines.push(...typeSection(t, schema));
  return lines.join('\n').trimEnd() + '\n';
}

const mode = process.argv[2];
if (mode === 'write' || mode === 'check') {
  const text = schemaReference(readFileSync(SCHEMA, 'utf8'));
  if (mode === 'write') {
    writeFileSync(REFERENCE, text);
    console.log(`wrote ${REFERENCE}`);
  } else {
    let current: string | undefined;
    try {
      current = readFileSync(REFERENCE, 'utf8');
    } catch {
      current = undefined;
    }
    if (current !== text) {
      console.error('docs/schema-reference.md is stale: run `npm run docs:schema` and commit it.');
      process.exit(1);
    }
    console.log('docs/schema-reference.md is up to date');
  }
} else if (mode !== undefined) {
  console.error('usage: schema-reference.ts write|check');
  process.exit(2);
}
