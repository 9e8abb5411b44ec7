/**
 * CORS: a browser page on another origin may call the API only if JOBGATE_CORS_ORIGINS names
 * its origin; by default none may (yoga's own default reflects every origin).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig, ConfigError } from '../../src/environment.js';
import { silentLogger } from '../../src/log.js';
import { createGatewayYoga } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
beforeAll(async () => {
  t = await createTestDb();
});
afterAll(() => t.close());

const gateway = (corsOrigins?: string[]) =>
  createGatewayYoga({ service: t.service, log: silentLogger, authenticate: async () => t.actor, ...(corsOrigins ? { corsOrigins } : {}) });

const preflight = (yoga: ReturnType<typeof gateway>, origin: string) =>
  yoga.fetch('http://jobgate.test/graphql', {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
  });

const post = (yoga: ReturnType<typeof gateway>, origin: string) =>
  yoga.fetch('http://jobgate.test/graphql', {
    method: 'POST',
    headers: { origin, 'content-type': 'application/json', authorization: 'Bearer x' },
    body: JSON.stringify({ query: '{ workspace { slug } }' }),
  });

describe('CORS', () => {
  it('gives a page on another origin no CORS headers by default, so its browser refuses it the answer', async () => {
    const yoga = gateway();
    const pre = await preflight(yoga, 'https://elsewhere.example');
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();
    const res = await post(yoga, 'https://elsewhere.example');
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('allows the configured origins only, without credentials', async () => {
    const yoga = gateway(['https://app.example', 'http://localhost:5173']);
    const pre = await preflight(yoga, 'https://app.example');
    expect(pre.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(pre.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('authorization');
    expect(pre.headers.get('access-control-allow-credentials')).not.toBe('true');
    const res = await post(yoga, 'http://localhost:5173');
    expect(res.headers.get('access-control-allow-origin')).toBe('http://localhost:5173');
    const other = await preflight(yoga, 'https://app.example.evil');
    expect(other.headers.get('access-control-allow-origin')).not.toBe('https://app.example.evil');
  });

  it('refuses a setting that is not a list of origins, naming the variable', () => {
    expect(() => parseConfig({ JOBGATE_CORS_ORIGINS: 'https://app.example/path' })).toThrow(ConfigError);
    expect(() => parseConfig({ JOBGATE_CORS_ORIGINS: 'app.example' })).toThrow(/JOBGATE_CORS_ORIGINS/);
    expect(parseConfig({ JOBGATE_CORS_ORIGINS: 'https://a.example, *' }).corsOrigins).toEqual(['https://a.example', '*']);
  });
});
