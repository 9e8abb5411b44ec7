/**
 * `extensions.code` takes only the values of the schema's ErrorCode enum, so a client generated
 * from the schema can switch on every error it will meet.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
let codes: Set<string>;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  const res = await g.gql(`{ __type(name: "ErrorCode") { enumValues { name description } } }`);
  const values = res.data!.__type.enumValues as { name: string; description: string }[];
  for (const v of values) expect(v.description.length).toBeGreaterThan(10);
  codes = new Set(values.map((v) => v.name));
});
afterAll(() => t.close());

describe('error codes', () => {
  it('are all values of ErrorCode, for every kind of failure a client can cause', async () => {
    const viewer = await t.service.authenticate((await t.service.createApiKey(t.actor, { name: 'viewer', role: 'VIEWER' })).key);
    await t.service.registerEndpoint(t.actor, { name: 'codes.ep', kind: 'HANDLER', handlerName: 'h' });
    const cases: [string, Promise<{ errors?: { extensions?: Record<string, any> }[] }>][] = [
      ['syntax', g.gql('{ jobs { ')],
      ['unknown field', g.gql('{ jobz { id } }')],
      ['not found', g.gql('{ job(id: "00000000-0000-0000-0000-000000000000") { id } }')],
      ['bad input', g.gql('mutation { registerEndpoint(input: { name: "Bad Name", kind: HTTP, url: "ftp://x" }) { id } }')],
      ['conflict', g.gql('mutation { registerEndpoint(input: { name: "codes.ep", kind: HANDLER, handlerName: "h" }) { id } }')],
      ['bad variable', g.gql('query ($k: JobKind) { jobs(filter: { kind: $k }) { nodes { id } } }', { k: 'IMMEDIAT' })],
      [
        'too costly',
        g.gql(
          `{ jobs(first: 100) { nodes { ${'executions(first: 100) { nodes { job { endpoint { jobs(first: 100) { nodes { id } } } } } } '.repeat(1)} } } }`,
        ),
      ],
      [
        'forbidden',
        g.gql('mutation { registerEndpoint(input: { name: "codes.two", kind: HANDLER, handlerName: "h" }) { id } }', {}, viewer),
      ],
    ];
    // The HTTP request itself.
    const raw = async (body: string, contentType = 'application/json') => {
      const res = await g.yoga.fetch('http://jobgate.test/graphql', {
        method: 'POST',
        headers: { 'content-type': contentType, 'x-jobgate-csrf': '1' },
        body,
      });
      const answer = (await res.json()) as { errors?: { extensions?: Record<string, any> }[] };
      // Read, not refused for want of a key: these are the request's own codes.
      expect(answer.errors?.[0]?.extensions?.code).toBe('BAD_REQUEST');
      return answer;
    };
    cases.push(
      ['not JSON', raw('{"query": ')],
      ['no query', raw('{"query": null}')],
      ['a batch', raw('[{"query": "{ __typename }"}]')],
      ['a Content-Type not read', raw('{"query": "{ __typename }"}', 'text/plain')],
      ['which operation', g.gql('query A { __typename } query B { __typename }')],
    );
    for (const [name, pending] of cases) {
      const res = await pending;
      expect(res.errors?.length, name).toBeGreaterThan(0);
      for (const error of res.errors!) {
        expect(codes.has(error.extensions?.code), `${name}: ${JSON.stringify(error)}`).toBe(true);
      }
    }
  });
});
