/**
 * The tables that hold secrets (endpoints: url, headers, sealed signing secret; configs: sealed
 * values; api keys: key hashes) have CHECK constraints, and a row that fails one is written by
 * Postgres into its log as "Failing row contains (...)", secrets and all, while the caller gets an
 * INTERNAL error. So every such constraint has a check in the service before it: bad input is
 * VALIDATION_FAILED naming the field, and nothing reaches the statement. This file lists the
 * constraints from the catalogue, so one added without a case here fails it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EndpointType } from '../../src/db/types.js';
import type { Role } from '../../src/service/kernel/actor.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
let httpId: string;
let handlerId: string;

const SECRET_TABLES = ['endpoints', 'configs', 'api_keys'];

/** Everything in the secret tables, to show a refused call changed nothing. */
async function snapshot(): Promise<string> {
  const parts = await Promise.all(SECRET_TABLES.map(async (table) => (await t.query(`select * from ${table} order by id`)).rows));
  return JSON.stringify(parts);
}

const http = {
  kind: 'HTTP' as const,
  url: 'https://example.com/hook',
  signingSecret: 'whsec_0123456789abcdef',
  headers: { authorization: 'Bearer s3cr3t-token' },
};

/** Per CHECK constraint: calls whose input would break it if it reached the statement. */
const CASES: Record<string, [string, () => Promise<unknown>][]> = {
  endpoints_name_check: [['a name that is not dotted lowercase', () => t.service.registerEndpoint(t.actor, { ...http, name: 'Bad Name' })]],
  endpoints_kind_check: [
    ['an unknown kind', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.kind', kind: 'QUEUE' as never })],
  ],
  endpoints_type_check: [
    [
      'an unknown type from a library caller',
      () => t.service.registerEndpoint(t.systemActor, { ...http, name: 'a.type' }, { type: 'EXTERNAL' as EndpointType }),
    ],
  ],
  endpoints_method_check: [
    ['an unknown method', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.method', method: 'TRACE' as never })],
    ['an unknown method on update', () => t.service.updateEndpoint(t.actor, { id: httpId, method: 'TRACE' as never })],
  ],
  endpoints_headers_check: [
    ['headers that are a list', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.headers', headers: ['x: y'] as never })],
    ['headers that are a string on update', () => t.service.updateEndpoint(t.actor, { id: httpId, headers: 'x: y' as never })],
  ],
  endpoints_timeout_ms_check: [
    ['a zero timeout', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.timeout', timeoutMs: 0 })],
    ['a negative timeout on update', () => t.service.updateEndpoint(t.actor, { id: httpId, timeoutMs: -1 })],
  ],
  endpoints_max_attempts_check: [
    ['no attempts', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.attempts', maxAttempts: 0 })],
    ['101 attempts on update', () => t.service.updateEndpoint(t.actor, { id: httpId, maxAttempts: 101 })],
  ],
  endpoints_backoff_base_ms_check: [
    ['a zero backoff base', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.base', backoffBaseMs: 0 })],
    ['a zero backoff base on update', () => t.service.updateEndpoint(t.actor, { id: httpId, backoffBaseMs: 0 })],
  ],
  // Unnamed table constraints are named by Postgres: endpoints_check is backoff_max_ms >= backoff_base_ms,
  endpoints_check: [
    [
      'a max below the given base',
      () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.max1', backoffBaseMs: 2000, backoffMaxMs: 1000 }),
    ],
    ['a max alone, below the default base', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.max2', backoffMaxMs: 500 })],
    ['a base alone, above the default max', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.max3', backoffBaseMs: 400_000 })],
    ['a base above the stored max on update', () => t.service.updateEndpoint(t.actor, { id: httpId, backoffBaseMs: 400_000 })],
    ['a max below the stored base on update', () => t.service.updateEndpoint(t.actor, { id: httpId, backoffMaxMs: 500 })],
  ],
  endpoints_concurrency_limit_check: [
    ['a zero concurrency limit', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.limit', concurrencyLimit: 0 })],
    ['a zero concurrency limit on update', () => t.service.updateEndpoint(t.actor, { id: httpId, concurrencyLimit: 0 })],
  ],
  endpoints_default_priority_check: [
    ['a default priority above 100', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.priority', defaultPriority: 101 })],
    ['a default priority below -100 on update', () => t.service.updateEndpoint(t.actor, { id: httpId, defaultPriority: -101 })],
  ],
  endpoints_key_concurrency_limit_check: [
    ['a zero per-key limit', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.keys', keyConcurrencyLimit: 0 })],
    ['a per-key limit above 10000 on update', () => t.service.updateEndpoint(t.actor, { id: httpId, keyConcurrencyLimit: 10_001 })],
  ],
  endpoints_rate_limit_check: [
    [
      'a rate limit of no starts',
      () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.rate', rateLimit: { count: 0, periodMs: 1000 } }),
    ],
    ['a zero burst on update', () => t.service.updateEndpoint(t.actor, { id: httpId, rateLimit: { count: 1, periodMs: 1000, burst: 0 } })],
  ],
  endpoints_key_rate_limit_check: [
    [
      'a rate limit per key of no starts',
      () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.keyrate', keyRateLimit: { count: 0, periodMs: 1000 } }),
    ],
    [
      'a zero burst per key on update',
      () => t.service.updateEndpoint(t.actor, { id: httpId, keyRateLimit: { count: 1, periodMs: 1000, burst: 0 } }),
    ],
  ],
  // endpoints_check1 is: an HTTP endpoint has a url and a method and no handler; a HANDLER endpoint the reverse.
  endpoints_check1: [
    ['an HTTP endpoint without a url', () => t.service.registerEndpoint(t.actor, { name: 'a.nourl', kind: 'HTTP' })],
    ['an HTTP endpoint with a handler', () => t.service.registerEndpoint(t.actor, { ...http, name: 'a.both', handlerName: 'h' })],
    [
      'a HANDLER endpoint with a url',
      () => t.service.registerEndpoint(t.actor, { name: 'a.hurl', kind: 'HANDLER', handlerName: 'h', url: 'https://example.com/' }),
    ],
    ['a url cleared on update', () => t.service.updateEndpoint(t.actor, { id: httpId, url: null })],
    ['a handler given to an HTTP endpoint on update', () => t.service.updateEndpoint(t.actor, { id: httpId, handlerName: 'h' })],
    [
      'a url given to a HANDLER endpoint on update',
      () => t.service.updateEndpoint(t.actor, { id: handlerId, url: 'https://example.com/' }),
    ],
    ['a handler cleared on update', () => t.service.updateEndpoint(t.actor, { id: handlerId, handlerName: null })],
  ],
  configs_entries_check: [
    ['entries that are not a list of entries', () => t.service.setConfig(t.actor, { name: 'a.config', entries: { token: 'x' } as never })],
  ],
  api_keys_name_check: [
    ['an empty key name', () => t.service.createApiKey(t.actor, { name: '', role: 'VIEWER' })],
    ['a key name of 201 characters', () => t.service.createApiKey(t.actor, { name: 'n'.repeat(201), role: 'VIEWER' })],
    ['an empty key name from the CLI', () => t.service.bootstrapKey('default', 'VIEWER', '')],
  ],
  api_keys_role_check: [
    ['an unknown role', () => t.service.createApiKey(t.actor, { name: 'k', role: 'ROOT' as never })],
    ['an unknown role from the CLI', () => t.service.bootstrapKey('default', 'ROOT' as Role, 'k')],
  ],
};

beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
  httpId = (await t.service.registerEndpoint(t.actor, { ...http, name: 'existing.http', backoffBaseMs: 1000, backoffMaxMs: 2000 })).id;
  handlerId = (await t.service.registerEndpoint(t.actor, { name: 'existing.handler', kind: 'HANDLER', handlerName: 'h' })).id;
});
afterAll(async () => {
  await g.close();
  await t.close();
});

describe('check constraints on tables holding secrets', () => {
  it('each has a case below', async () => {
    const { rows } = await t.query<{ name: string }>(
      `select conname as name from pg_constraint
       where contype = 'c' and conrelid::regclass::text = any($1::text[])`,
      [SECRET_TABLES],
    );
    expect(rows.map((r) => r.name).sort()).toEqual(Object.keys(CASES).sort());
  });

  it.each(Object.entries(CASES).flatMap(([constraint, cases]) => cases.map(([what, call]) => [constraint, what, call] as const)))(
    '%s is checked first: %s is VALIDATION_FAILED and changes nothing',
    async (_constraint, _what, call) => {
      const before = await snapshot();
      expect(await codeOf(call)).toBe('VALIDATION_FAILED');
      expect(await snapshot()).toBe(before);
    },
  );
});

describe('registerEndpoint over GraphQL', () => {
  const REGISTER = `mutation ($input: RegisterEndpointInput!) { registerEndpoint(input: $input) { id } }`;

  it.each([
    ['backoffMaxMs alone, below the default base', { backoffMaxMs: 500 }, 'backoffMaxMs'],
    ['backoffBaseMs alone, above the default max', { backoffBaseMs: 400_000 }, 'backoffBaseMs'],
  ])('refuses %s as VALIDATION_FAILED naming the field, writing nothing', async (_what, backoff, field) => {
    const before = await snapshot();
    const res = await g.gql(REGISTER, {
      input: {
        name: `gql.${field.toLowerCase()}`,
        kind: 'HTTP',
        url: 'https://example.com/hook',
        signingSecret: 'whsec_0123456789abcdef',
        ...backoff,
      },
    });
    expect(res.data).toBeNull();
    expect(res.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: [field] }] });
    expect(await snapshot()).toBe(before);
  });
});
