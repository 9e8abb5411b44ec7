/**
 * The key watch on its own (src/subscriptions/key-watch.ts), with the service's rule stood in by a
 * function that counts what it is asked: a stream opening checks its own actor, not every stream
 * of its key again; a hint checks every stream of the key, each actor once; a lapsed key ends its
 * streams and only those.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import type { Actor } from '../../src/service/kernel/actor.js';
import { KeyWatch } from '../../src/subscriptions/key-watch.js';

const actorOf = (keyId: string): Actor => ({ kind: 'user', keyId, role: 'VIEWER', workspaceId: 'w' }) as Actor;
const tick = () => new Promise((r) => setImmediate(r));

function watchWith(lapsedKeys: Set<string>) {
  const asked: Actor[][] = [];
  const keys = new KeyWatch({
    log: createLogger('silent'),
    recheckMs: 60_000,
    lapsedActors: async (actors) => {
      asked.push([...actors]);
      return actors.filter((a) => lapsedKeys.has(a.keyId!));
    },
  });
  return { keys, asked };
}

describe('KeyWatch', () => {
  it('checks each new stream once as it opens, not every stream of its key again', async () => {
    const { keys, asked } = watchWith(new Set());
    const unwatch: (() => void)[] = [];
    // Streams opening one after another, each check answered before the next opens.
    for (let i = 0; i < 200; i++) {
      unwatch.push(keys.watch(actorOf('k1'), () => {}));
      await tick();
      await tick();
    }
    const checked = asked.reduce((n, a) => n + a.length, 0);
    expect(checked).toBe(200);
    unwatch.forEach((u) => u());
    expect(keys.size).toBe(0);
  });

  it("ends a new stream found lapsed together with its key's other watches, in the order they began (a connection before its streams)", async () => {
    const lapsed = new Set<string>();
    const { keys, asked } = watchWith(lapsed);
    const ended: string[] = [];
    // A connection, then its stream (each with an actor of its own, as a WebSocket and an
    // operation on it authenticate apart), and another key's stream.
    keys.watch(actorOf('k1'), () => ended.push('connection'));
    await tick();
    await tick();
    keys.watch(actorOf('k2'), () => ended.push('other key'));
    // The key lapses before the stream's own check has been answered.
    lapsed.add('k1');
    keys.watch(actorOf('k1'), () => ended.push('stream'));
    for (let i = 0; i < 6; i++) await tick();
    expect(ended).toEqual(['connection', 'stream']);
    expect(asked.at(-1)).toHaveLength(2); // the second round: the key's two watches
    expect(keys.size).toBe(1);
  });

  it("checks every stream of a hinted key, one actor once however many of its streams it watches, and ends a lapsed key's streams only", async () => {
    const lapsed = new Set<string>();
    const { keys, asked } = watchWith(lapsed);
    const shared = actorOf('k1');
    const ended: string[] = [];
    for (let i = 0; i < 3; i++) keys.watch(shared, () => ended.push(`k1/${i}`));
    keys.watch(actorOf('k2'), () => ended.push('k2'));
    await tick();
    await tick();
    asked.length = 0;

    lapsed.add('k1');
    keys.hint('k1');
    await tick();
    await tick();
    expect(asked).toEqual([[shared]]);
    expect(ended.sort()).toEqual(['k1/0', 'k1/1', 'k1/2']);
    expect(keys.size).toBe(1);
  });

  it('says an outage once, and once when it can check again, however many checks fail meanwhile', async () => {
    const lines: string[] = [];
    let down = true;
    const keys = new KeyWatch({
      log: createLogger('info', (l) => lines.push(l)),
      recheckMs: 60_000,
      lapsedActors: async (actors) => {
        if (down) throw new Error('connect ECONNREFUSED');
        return actors.filter(() => false);
      },
    });
    // A connection and its stream: two watches of one key.
    const unwatch = [keys.watch(actorOf('k1'), () => {}), keys.watch(actorOf('k1'), () => {})];
    for (let i = 0; i < 5; i++) {
      keys.hint(undefined);
      for (let j = 0; j < 4; j++) await tick();
    }
    const said = lines.filter((l) => l.includes('could not check'));
    expect(said).toHaveLength(1);
    expect(said[0]).toContain('of 1 key(s) with open streams');
    down = false;
    keys.hint(undefined);
    for (let j = 0; j < 4; j++) await tick();
    expect(lines.filter((l) => l.includes('checking the API keys of open streams again'))).toHaveLength(1);
    unwatch.forEach((u) => u());
  });
});
