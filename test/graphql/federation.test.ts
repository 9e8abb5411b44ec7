/**
 * jobgate as a federation subgraph, composed with a second subgraph in a real gateway (Hive
 * Gateway's runtime, from npm) over real HTTP: an `orders` subgraph whose Order refers to a Job,
 * Execution, Run and Endpoint by id, and one query through the gateway that crosses both, with the
 * caller's key passed through to jobgate. A reference to another workspace's object resolves to
 * null, and jobgate's own authentication still answers a gateway request that carries no key.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGatewayRuntime, type GatewayRuntime } from '@graphql-hive/gateway-runtime';
import SchemaBuilder from '@pothos/core';
import DirectivesPlugin from '@pothos/plugin-directives';
import FederationPlugin from '@pothos/plugin-federation';
import { composeServices, compositionHasErrors } from '@theguild/federation-composition';
import { parse } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { printSubgraphSdl } from '../../src/schema/index.js';
import { startGateway, type RunningGateway } from '../../src/server/gateway.js';
import { createTestDb, type TestDb } from '../support/db.js';

let t: TestDb;
let jobgate: RunningGateway;
let jobgateUrl: string;
let orders: Server;
let ordersUrl: string;
let router: GatewayRuntime;
let routerServer: Server;
let routerUrl: string;
let keyA: string;
let keyB: string;
const a: Record<'job' | 'execution' | 'run' | 'endpoint', string> = { job: '', execution: '', run: '', endpoint: '' };
let jobOfB: string;
const NOWHERE = '00000000-0000-4000-8000-000000000000';

interface Order {
  id: string;
  jobId: string;
  executionId?: string;
  runId?: string;
  endpointId?: string;
}
const ORDERS: Order[] = [];

/** The second subgraph: orders that refer to jobgate's entities by id and resolve none of them. */
function ordersSubgraph() {
  const builder = new SchemaBuilder<{ Context: object }>({ plugins: [DirectivesPlugin, FederationPlugin] });
  const stub = (name: string) =>
    builder.externalRef(name, builder.keyDirective(builder.selection<{ id: string }>('id'), false)).implement({
      externalFields: (t) => ({ id: t.id({ nullable: false }) }),
    });
  const Job = stub('Job');
  const Execution = stub('Execution');
  const Run = stub('Run');
  const Endpoint = stub('Endpoint');
  const ref = (id: string | undefined) => (id ? { id } : null);
  const OrderRef = builder.objectRef<Order>('Order').implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      job: t.field({ type: Job, resolve: (o) => ref(o.jobId) }),
      execution: t.field({ type: Execution, resolve: (o) => ref(o.executionId) }),
      run: t.field({ type: Run, resolve: (o) => ref(o.runId) }),
      endpoint: t.field({ type: Endpoint, resolve: (o) => ref(o.endpointId) }),
    }),
  });
  builder.queryType({ fields: (t) => ({ orders: t.field({ type: [OrderRef], nullable: false, resolve: () => ORDERS }) }) });
  return builder.toSubGraphSchema({ linkUrl: 'https://specs.apollo.dev/federation/v2.6' });
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
}

async function post(url: string, query: string, key?: string) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({ query }),
  });
  return {
    status: res.status,
    body: (await res.json()) as { data?: any; errors?: { message: string; path?: unknown[]; extensions?: any }[] },
  };
}

/** A subgraph's SDL, as a router fetches it: `_service { sdl }`, with a key where one is needed. */
async function sdlOf(url: string, key?: string): Promise<string> {
  const res = await post(url, '{ _service { sdl } }', key);
  expect(res.body.errors).toBeUndefined();
  return res.body.data._service.sdl as string;
}

beforeAll(async () => {
  t = await createTestDb();
  jobgate = await startGateway({
    service: t.service,
    log: createLogger('silent'),
    host: '127.0.0.1',
    port: 0,
    console: false,
    authenticate: (request) => t.service.authenticate(/^Bearer (\S+)$/.exec(request.headers.get('authorization') ?? '')?.[1]),
  });
  jobgateUrl = `http://127.0.0.1:${(jobgate.server.address() as AddressInfo).port}/graphql`;
  keyA = (await t.service.bootstrapKey('default', 'VIEWER', 'router A')).key;
  keyB = (await t.service.bootstrapKey('other', 'VIEWER', 'router B')).key;

  const endpoint = await t.service.registerEndpoint(t.actor, { name: 'orders.ship', kind: 'HANDLER', handlerName: 'orders.ship' });
  const { job } = await t.service.createJob(t.actor, { endpointId: endpoint.id, kind: 'IMMEDIATE', name: 'ship order 1', input: {} });
  const execution = (await t.service.executions(t.actor, { jobId: job.id })).edges[0]!.node;
  const run = (await t.service.triggerRun(t.actor, { force: true, name: 'orders.audit' })).run;
  Object.assign(a, { job: job.id, execution: execution.id, run: run.id, endpoint: endpoint.id });
  const endpointOfB = await t.service.registerEndpoint(t.otherActor, { name: 'b.secret', kind: 'HANDLER', handlerName: 'b' });
  jobOfB = (await t.service.createJob(t.otherActor, { endpointId: endpointOfB.id, kind: 'IMMEDIATE', name: 'b private job', input: {} }))
    .job.id;
  ORDERS.push(
    { id: 'o-1', jobId: a.job, executionId: a.execution, runId: a.run, endpointId: a.endpoint },
    { id: 'o-2', jobId: jobOfB },
    { id: 'o-3', jobId: NOWHERE },
  );

  orders = createServer(createYoga({ schema: ordersSubgraph(), logging: false }));
  ordersUrl = await listen(orders);

  const composed = composeServices([
    { name: 'jobgate', typeDefs: parse(await sdlOf(jobgateUrl, keyA)), url: jobgateUrl },
    { name: 'orders', typeDefs: parse(await sdlOf(ordersUrl)), url: ordersUrl },
  ]);
  if (compositionHasErrors(composed)) throw new Error(composed.errors.map((e) => e.message).join('\n'));
  router = createGatewayRuntime({
    supergraph: composed.supergraphSdl,
    logging: false,
    // The caller's key goes to jobgate, which authenticates the router's requests as any others.
    propagateHeaders: {
      fromClientToSubgraphs: ({ request, subgraphName }) =>
        subgraphName === 'jobgate' ? { authorization: request.headers.get('authorization') } : {},
    },
  });
  routerServer = createServer(router);
  routerUrl = await listen(routerServer);
});

afterAll(async () => {
  await new Promise((resolve) => routerServer?.close(resolve));
  await router?.dispose();
  await new Promise((resolve) => orders?.close(resolve));
  await jobgate?.close();
  await t?.close();
});

const CROSSING = `{
  orders {
    id
    job { id name status endpoint { name } }
    execution { id status job { id } }
    run { id name }
    endpoint { id name }
  }
}`;

describe('jobgate as a federation subgraph', () => {
  it('serves its SDL with an @key on Job, Execution, Run and Endpoint, to a keyed caller only', async () => {
    const sdl = await sdlOf(jobgateUrl, keyA);
    expect(sdl).toContain('@link(url: "https://specs.apollo.dev/federation/v2.6"');
    for (const type of ['Job', 'Execution', 'Run', 'Endpoint'])
      expect(sdl).toMatch(new RegExp(`type ${type} implements Node[^{]*@key\\(fields: "id"\\)`));
    expect(sdl + '\n').toBe(printSubgraphSdl()); // what `jobgate schema --subgraph` prints
    const anonymous = await post(jobgateUrl, '{ _service { sdl } }');
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it("answers a query across both subgraphs through the gateway, as the caller's key", async () => {
    const res = await post(routerUrl, CROSSING, keyA);
    // Errors there are, for the other orders only (their references are of another workspace or of nothing: below).
    expect(res.body.errors?.filter((e) => e.path?.[1] === 0)).toEqual([]);
    expect(res.body.data.orders[0]).toEqual({
      id: 'o-1',
      job: { id: a.job, name: 'ship order 1', status: 'ACTIVE', endpoint: { name: 'orders.ship' } },
      execution: { id: a.execution, status: 'PENDING', job: { id: a.job } },
      run: { id: a.run, name: 'orders.audit' },
      endpoint: { id: a.endpoint, name: 'orders.ship' },
    });
  });

  it("resolves a reference to another workspace's object to null, and says nothing of it", async () => {
    const res = await post(routerUrl, CROSSING, keyA);
    const second = res.body.data.orders[1];
    expect(second).toEqual({ id: 'o-2', job: null, execution: null, run: null, endpoint: null });
    // The router's own error for an entity that came back null (a non-null field of it is null), the
    // same as for an id of nothing (the third order): nothing tells B's job from no job.
    expect(res.body.data.orders[2]).toEqual({ id: 'o-3', job: null, execution: null, run: null, endpoint: null });
    const errorsOf = (order: number) =>
      res.body.errors?.filter((e) => e.path?.[1] === order).map((e) => ({ ...e, path: e.path?.slice(2) }));
    expect(errorsOf(1)).toHaveLength(1);
    expect(errorsOf(1)).toEqual(errorsOf(2));
    const text = JSON.stringify(res.body);
    expect(text).not.toContain('b private job');
    expect(text).not.toContain('b.secret');

    // The other way round: B's key reads B's job and none of A's objects.
    const asB = await post(routerUrl, CROSSING, keyB);
    expect(asB.body.data.orders[0]).toEqual({ id: 'o-1', job: null, execution: null, run: null, endpoint: null });
    expect(asB.body.data.orders[1].job).toMatchObject({ id: jobOfB, name: 'b private job' });
    expect(JSON.stringify(asB.body)).not.toContain('ship order 1');
  });

  it('answers references directly: in order, null for another workspace or an id of nothing, each type by its own read', async () => {
    const representations = [
      { __typename: 'Job', id: a.job },
      { __typename: 'Job', id: jobOfB },
      { __typename: 'Execution', id: a.execution },
      { __typename: 'Run', id: a.run },
      { __typename: 'Endpoint', id: a.endpoint },
      { __typename: 'Job', id: a.endpoint },
      { __typename: 'Job', id: 'not-a-uuid' },
    ];
    const res = await fetch(jobgateUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${keyA}` },
      body: JSON.stringify({
        query: `query ($r: [_Any!]!) { _entities(representations: $r) { __typename ... on Node { id } } }`,
        variables: { r: representations },
      }),
    });
    const body = (await res.json()) as { data?: any; errors?: unknown[] };
    expect(body.errors).toBeUndefined();
    expect(body.data._entities).toEqual([
      { __typename: 'Job', id: a.job },
      null,
      { __typename: 'Execution', id: a.execution },
      { __typename: 'Run', id: a.run },
      { __typename: 'Endpoint', id: a.endpoint },
      null,
      null,
    ]);
  });

  it('refuses a reference it cannot read with VALIDATION_FAILED naming it, not an unexpected error', async () => {
    for (const [bad, message] of [
      [{ id: a.job }, /__typename must be one of/],
      ['a string', /must be an object/],
      [5, /must be an object/],
      [{ __typename: 'Nope', id: a.job }, /__typename must be one of/],
      [{ __typename: 'Workspace', id: a.job }, /__typename must be one of/],
      [{ __typename: 'Query', id: a.job }, /__typename must be one of/],
      [{ __typename: 'Job', id: 7 }, /id must be a string/],
    ] as const) {
      const res = await fetch(jobgateUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${keyA}` },
        body: JSON.stringify({
          query: `query ($r: [_Any!]!) { _entities(representations: $r) { __typename } }`,
          variables: { r: [{ __typename: 'Job', id: a.job }, bad] },
        }),
      });
      const body = (await res.json()) as { errors?: { message: string; extensions?: { code?: string; issues?: unknown } }[] };
      expect(body.errors?.[0]?.extensions, JSON.stringify(bad)).toMatchObject({
        code: 'VALIDATION_FAILED',
        issues: [{ path: ['representations', 1], message: expect.stringMatching(message) }],
      });
    }
  });

  it('prices references as a page and takes at most 100 at once: a big selection per reference is over the cost limit, 101 are refused', async () => {
    const send = async (query: string, r: unknown[]) => {
      const res = await fetch(jobgateUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${keyA}` },
        body: JSON.stringify({ query, variables: { r } }),
      });
      return (await res.json()) as { data?: any; errors?: { message: string; extensions?: { code?: string } }[] };
    };
    const refs = (n: number) => Array.from({ length: n }, () => ({ __typename: 'Job', id: a.job }));
    // One reference with a page of executions is within the limit; a hundred of them are not.
    const heavy = `query ($r: [_Any!]!) { _entities(representations: $r) { ... on Job { id executions(first: 100) { nodes { id } } } } }`;
    expect((await send(heavy, refs(1))).errors).toBeUndefined();
    const priced = await send(heavy, refs(100));
    expect(priced.data).toBeUndefined();
    expect(priced.errors?.[0]?.message).toMatch(/Cost limit/);
    // A light selection: 100 are answered, 101 refused with VALIDATION_FAILED.
    const light = `query ($r: [_Any!]!) { _entities(representations: $r) { ... on Job { id } } }`;
    expect((await send(light, refs(100))).data._entities).toHaveLength(100);
    const over = await send(light, refs(101));
    expect(over.errors?.[0]?.extensions?.code).toBe('VALIDATION_FAILED');
    expect(over.errors?.[0]?.message).toMatch(/at most 100 references/);
  });

  it("passes no key when the caller sends none: jobgate refuses the router's request, the orders still answer", async () => {
    const res = await post(routerUrl, CROSSING);
    expect(res.body.data?.orders?.map((o: { id: string }) => o.id)).toEqual(['o-1', 'o-2', 'o-3']);
    expect(res.body.data.orders[0].job).toBeNull();
    expect(JSON.stringify(res.body)).not.toContain('ship order 1');
    expect(res.body.errors?.length).toBeGreaterThan(0);
  });
});
