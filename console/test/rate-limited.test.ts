/**
 * The console's requests (src/lib/api.ts) wait out a refusal by the gateway's bounds on load and
 * send again, against a real gateway whose key rate is small: a screen opening several queries at
 * once is answered, not shown RATE_LIMITED; a key refused every time still gets the error, after
 * a few tries.
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DOCUMENTS } from '../../src/server/console.js';
import type { RunningGateway } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../../test/support/db.js';
import { listeningGateway } from '../../test/support/graphql.js';
import { ViewerDocument } from '../src/gql/graphql.ts';
import { ApiError, createApi, RATE_LIMIT_RETRIES } from '../src/lib/api.ts';

let t: TestDb;
const gateways: RunningGateway[] = [];
const realFetch = globalThis.fetch;
let posts = 0;
let consoleDir: string;

async function gateway(requestsPerSecond: number): Promise<string> {
  const gw = await listeningGateway(t, {
    // The console's documents, so each request is one POST of its hash (as from a served console).
    console: consoleDir,
    refusalHoldMs: 0,
    bounds: { requestsPerSecond, requestBurst: 1 },
  });
  gateways.push(gw);
  return gw.url;
}

const newKey = async (name: string) => (await t.service.bootstrapKey('default', 'ADMIN', name)).key;

beforeAll(async () => {
  t = await createTestDb();
  consoleDir = mkdtempSync(join(tmpdir(), 'jobgate-console-'));
  copyFileSync(join(import.meta.dirname, '../src/gql/persisted-documents.json'), join(consoleDir, CONSOLE_DOCUMENTS));
  globalThis.fetch = (input, init) => {
    posts++;
    return realFetch(input, init);
  };
});
afterEach(() => {
  posts = 0;
});
afterAll(async () => {
  globalThis.fetch = realFetch;
  for (const gw of gateways) await gw.close();
  await t.close();
  rmSync(consoleDir, { recursive: true, force: true });
});

describe('a request the bounds on load refuse', () => {
  it('is sent again after the wait it was given, so a burst of queries is answered', async () => {
    // One request at once, then one every 200 ms: four at once are three refusals without waiting.
    const api = createApi(await newKey('burst'), await gateway(5));
    const answers = await Promise.all([1, 2, 3, 4].map(() => api.request(ViewerDocument)));
    expect(answers.map((a) => a.viewer.role)).toEqual(['ADMIN', 'ADMIN', 'ADMIN', 'ADMIN']);
    expect(posts).toBeGreaterThan(4);
  });

  it('shows RATE_LIMITED when it is refused every time, after a few tries', async () => {
    // One request every 1,000 s: after the first, each try is told to wait longer than the cap.
    const api = createApi(await newKey('flooded'), await gateway(0.001));
    await api.request(ViewerDocument);
    posts = 0;
    const refused = await api.request(ViewerDocument).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).code).toBe('RATE_LIMITED');
    expect(posts).toBe(1 + RATE_LIMIT_RETRIES);
  }, 30_000);
});
