import { readFileSync } from 'node:fs';
import { getIntrospectionQuery, isEnumType, isInputObjectType, isInterfaceType, isObjectType, isScalarType, isUnionType } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printSdl, schema } from '../../src/schema/index.js';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
});
afterAll(() => t.close());

describe('the schema as a product', () => {
  it('matches the checked-in schema.graphql', () => {
    const checkedIn = readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8');
    expect(checkedIn).toBe(printSdl());
  });

  it('describes every type, field, argument and enum value', () => {
    const missing: string[] = [];
    for (const type of Object.values(schema.getTypeMap())) {
      if (type.name.startsWith('__')) continue;
      if (isScalarType(type) && ['String', 'Int', 'Float', 'Boolean', 'ID'].includes(type.name)) continue;
      if (!type.description) missing.push(type.name);
      if (isObjectType(type) || isInterfaceType(type) || isInputObjectType(type)) {
        for (const field of Object.values(type.getFields())) {
          if (!field.description) missing.push(`${type.name}.${field.name}`);
          for (const arg of 'args' in field ? field.args : []) {
            if (!arg.description) missing.push(`${type.name}.${field.name}(${arg.name})`);
          }
        }
      }
      if (isEnumType(type)) {
        for (const value of type.getValues()) if (!value.description) missing.push(`${type.name}.${value.name}`);
      }
      if (isUnionType(type) && !type.description) missing.push(type.name);
    }
    expect(missing).toEqual([]);
  });

  it('answers the full introspection query that code generators send, with every option', async () => {
    const res = await g.gql(
      getIntrospectionQuery({
        descriptions: true,
        inputValueDeprecation: true,
        specifiedByUrl: true,
        directiveIsRepeatable: true,
        schemaDescription: true,
        oneOf: true,
      }),
    );
    expect(res.errors).toBeUndefined();
    const names = res.data.__schema.types.map((ty: { name: string }) => ty.name);
    expect(names).toEqual(expect.arrayContaining(['Job', 'Endpoint', 'Execution', 'CreateJobInput', 'JobConnection']));
    expect(res.data.__schema.description).toMatch(/^jobgate/);
    // A client can tell what DateTime's strings are without reading its prose.
    const dateTime = res.data.__schema.types.find((ty: { name: string }) => ty.name === 'DateTime');
    expect(dateTime.specifiedByURL).toMatch(/rfc3339/);
  });
});

describe('GraphiQL', () => {
  it('is served at /graphql to browsers, with its code inlined rather than loaded from a CDN', async () => {
    const res = await g.yoga.fetch('http://jobgate.test/graphql', { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain('renderYogaGraphiQL');
    const external = [...html.matchAll(/<(?:script|link)[^>]+(?:src|href)="(https?:[^"]+)"/g)].map((m) => m[1]);
    expect(external).toEqual([]);
    expect(html).not.toMatch(/unpkg\.com|jsdelivr|cdnjs/);
  });
});
