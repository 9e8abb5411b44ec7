/**
 * Subscription events executed once for subscribers that would get the same result
 * (src/subscriptions/shared-event-results.ts): shared only between equal documents, variables and
 * actors, each subscriber still gets every event, a failing source arrives as a GraphQLError.
 */
import { GraphQLError, GraphQLInt, GraphQLObjectType, GraphQLSchema, GraphQLString, parse, type ExecutionResult } from 'graphql';
import { describe, expect, it } from 'vitest';
import type { Actor } from '../../src/service/kernel/actor.js';
import { SlowConsumerError, Feed } from '../../src/subscriptions/hub/feed.js';
import { subscribeShared } from '../../src/subscriptions/shared-event-results.js';

interface Tick {
  n: number;
}

function world() {
  const feeds = new Map<string, Feed<Tick>>();
  let executions = 0;
  const Tick = new GraphQLObjectType<Tick, { actor: Actor }>({
    name: 'Tick',
    fields: {
      n: { type: GraphQLInt, resolve: (t) => (executions++, t.n) },
      seenBy: { type: GraphQLString, resolve: (_t, _a, ctx) => ctx.actor.workspaceId },
      scaled: { type: GraphQLInt, args: { by: { type: GraphQLInt } }, resolve: (t, args: { by: number }) => t.n * args.by },
    },
  });
  const schema = new GraphQLSchema({
    query: new GraphQLObjectType({ name: 'Query', fields: { ok: { type: GraphQLInt, resolve: () => 1 } } }),
    subscription: new GraphQLObjectType({
      name: 'Subscription',
      fields: {
        ticks: {
          type: Tick,
          args: { name: { type: GraphQLString } },
          subscribe: (_root, args: { name: string }) => {
            const feed = new Feed<Tick>(() => {});
            feeds.set(`${args.name}:${feeds.size}`, feed);
            return feed;
          },
          resolve: (t: Tick) => t,
        },
      },
    }),
  });
  return { schema, feeds: () => [...feeds.values()], executions: () => executions };
}

const actor = (workspaceId: string, keyId = 'k1'): Actor => ({ workspaceId, kind: 'user', role: 'VIEWER', keyId });
const doc = parse('subscription($by: Int) { ticks(name: "a") { n seenBy scaled(by: $by) } }');

async function open(w: ReturnType<typeof world>, who: Actor, by: number) {
  const stream = await subscribeShared({ schema: w.schema, document: doc, variableValues: { by }, contextValue: { actor: who } });
  if (!(Symbol.asyncIterator in stream)) throw new Error(`expected a stream: ${JSON.stringify(stream)}`);
  return stream;
}

const next = async (s: AsyncIterator<ExecutionResult>) => (await s.next()).value as ExecutionResult;

describe('shared subscription execution', () => {
  it('executes an event once for subscribers with the same document, variables and actor, and each gets it', async () => {
    const w = world();
    const a = await open(w, actor('w1'), 2);
    const b = await open(w, actor('w1'), 2);
    for (const n of [1, 2]) {
      const tick = { n };
      for (const f of w.feeds()) f.push(tick);
      expect(await next(a)).toEqual({ data: { ticks: { n, seenBy: 'w1', scaled: 2 * n } } });
      expect(await next(b)).toEqual({ data: { ticks: { n, seenBy: 'w1', scaled: 2 * n } } });
    }
    expect(w.executions()).toBe(2);
  });

  it('executes apart for another actor or other variables, each with its own result', async () => {
    const w = world();
    const mine = await open(w, actor('w1'), 2);
    const otherWorkspace = await open(w, actor('w2'), 2);
    const otherKey = await open(w, actor('w1', 'k2'), 2);
    const otherVariables = await open(w, actor('w1'), 3);
    const tick = { n: 5 };
    for (const f of w.feeds()) f.push(tick);
    expect(await next(mine)).toEqual({ data: { ticks: { n: 5, seenBy: 'w1', scaled: 10 } } });
    expect(await next(otherWorkspace)).toEqual({ data: { ticks: { n: 5, seenBy: 'w2', scaled: 10 } } });
    expect(await next(otherKey)).toEqual({ data: { ticks: { n: 5, seenBy: 'w1', scaled: 10 } } });
    expect(await next(otherVariables)).toEqual({ data: { ticks: { n: 5, seenBy: 'w1', scaled: 15 } } });
    expect(w.executions()).toBe(4);
  });

  it('executes equal but distinct event objects apart (a catch-up read is not a live one)', async () => {
    const w = world();
    const a = await open(w, actor('w1'), 1);
    const b = await open(w, actor('w1'), 1);
    const [fa, fb] = w.feeds();
    fa!.push({ n: 1 });
    fb!.push({ n: 1 });
    expect(await next(a)).toEqual(await next(b));
    expect(w.executions()).toBe(2);
  });

  it('hands a failing source to the client as a GraphQLError carrying the original, and ends on return', async () => {
    const w = world();
    const failing = await open(w, actor('w1'), 1);
    const leaving = await open(w, actor('w1'), 1);
    const [ff, fl] = w.feeds();
    ff!.fail(new SlowConsumerError(10));
    const error = await failing.next().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(GraphQLError);
    expect((error as GraphQLError).originalError).toBeInstanceOf(SlowConsumerError);
    // A subscriber that leaves while its stream is quiet ends its feed at once.
    const pending = leaving.next();
    await leaving.return!();
    expect(await pending).toEqual({ done: true, value: undefined });
    expect(fl!.closed).toBe(true);
  });

  it('answers a subscribe that fails with errors, not a stream', async () => {
    const w = world();
    const result = await subscribeShared({
      schema: w.schema,
      document: parse('subscription { ticks(name: 1) { n } }'),
      contextValue: { actor: actor('w1') },
    });
    expect(Symbol.asyncIterator in result).toBe(false);
    expect((result as ExecutionResult).errors?.length).toBeGreaterThan(0);
  });
});
