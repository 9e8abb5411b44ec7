/**
 * The console's requests name their documents by hash alone (src/lib/persisted.ts), over HTTP
 * (src/lib/api.ts) and graphql-ws (src/lib/live.ts), against real gateways: one that trusts the
 * console's manifest and runs nothing else (persisted only), and one that knows none of its hashes
 * (another replica mid-deploy), where each request is sent once more with its document.
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DOCUMENTS } from '../../src/server/console.js';
import { createTestDb, type TestDb } from '../../test/support/db.js';
import { eventually } from '../../test/support/engine.js';
import { startLiveGateway, type LiveGateway } from '../../test/support/live.js';
import { ExecutionsLiveDocument, ViewerDocument } from '../src/gql/graphql.ts';
import { createApi } from '../src/lib/api.ts';
import { createLive } from '../src/lib/live.ts';

let t: TestDb;
let key: string;
let consoleDir: string;
let trusting: LiveGateway;
let unaware: LiveGateway;
const realFetch = globalThis.fetch;
const sent: Record<string, unknown>[] = [];

beforeAll(async () => {
  t = await createTestDb();
  key = (await t.service.bootstrapKey('default', 'ADMIN', 'console persisted')).key;
  await t.service.registerEndpoint(t.actor, { name: 'persisted.idle', kind: 'HANDLER', handlerName: 'nobody' });
  consoleDir = mkdtempSync(join(tmpdir(), 'jobgate-console-'));
  copyFileSync(join(import.meta.dirname, '../src/gql/persisted-documents.json'), join(consoleDir, CONSOLE_DOCUMENTS));
  trusting = await startLiveGateway(t, { gateway: { console: consoleDir, persisted: { only: true } } });
  unaware = await startLiveGateway(t, { gateway: { console: false } });
  // What the console's fetches send, as the gateway reads it.
  globalThis.fetch = (input, init) => {
    sent.push(JSON.parse(String(init?.body)) as Record<string, unknown>);
    return realFetch(input, init);
  };
});
afterEach(() => {
  sent.length = 0;
});
afterAll(async () => {
  globalThis.fetch = realFetch;
  await trusting.close();
  await unaware.close();
  await t.close();
  rmSync(consoleDir, { recursive: true, force: true });
});

const hash = (ViewerDocument.__meta__ as { hash: string }).hash;

describe("the console's persisted documents", () => {
  it('go over HTTP as a hash alone, which a gateway that runs only trusted documents answers', async () => {
    const data = await createApi(key, trusting.httpUrl).request(ViewerDocument);
    expect(data.viewer.role).toBe('ADMIN');
    expect(sent).toEqual([{ extensions: { persistedQuery: { version: 1, sha256Hash: hash } }, variables: {} }]);
  });

  it('are sent once more with their document to a gateway that does not know the hash', async () => {
    const data = await createApi(key, unaware.httpUrl).request(ViewerDocument);
    expect(data.viewer.role).toBe('ADMIN');
    expect(sent).toHaveLength(2);
    expect(sent[0]).not.toHaveProperty('query');
    expect(sent[1]).toEqual({ query: ViewerDocument.toString(), variables: {} });
  });

  it.each([
    ['a gateway that runs only trusted documents', () => trusting],
    ['a gateway that does not know the hash (sent again with the document)', () => unaware],
  ])('go over graphql-ws by hash too: %s delivers the stream', async (_name, gateway) => {
    const live = createLive({ url: gateway().wsUrl, key, onSignOut: () => {}, webSocketImpl: WebSocket });
    try {
      await eventually(async () => live.state === 'live');
      const seen: string[] = [];
      const errors: unknown[] = [];
      const stop = live.subscribe(
        ExecutionsLiveDocument,
        {},
        {
          next: (d) => seen.push(d.executionUpdates.executionId),
          cursor: (d) => d.executionUpdates.cursor,
          error: (e) => errors.push(e),
        },
      );
      // The subscription is open once an event created after it arrives.
      await eventually(
        async () => {
          if (errors.length > 0) throw new Error(`the subscription failed: ${JSON.stringify(errors)}`);
          if (seen.length > 0) return true;
          await t.service.createJob(t.actor, { endpointName: 'persisted.idle', kind: 'IMMEDIATE' });
          return false;
        },
        { interval: 100, what: 'an execution event' },
      );
      stop();
      expect(errors).toEqual([]);
    } finally {
      live.dispose();
    }
  });
});
