import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
beforeAll(async () => {
  t = await createTestDb();
  g = createTestGateway(t);
});
afterAll(() => t.close());

/** Reads a connection page by page (`first` each), returning what `pick` takes of every node and the pages read. */
async function readAll(query: string, field: (data: any) => any, first: number, variables: Record<string, unknown> = {}, as?: any) {
  const seen: any[] = [];
  let after: string | null = null;
  let pages = 0;
  for (;;) {
    const res: any = await g.gql(query, { ...variables, first, after }, as);
    expect(res.errors).toBeUndefined();
    const conn = field(res.data);
    for (const edge of conn.edges) {
      expect(typeof edge.cursor).toBe('string');
      seen.push(edge.node);
    }
    pages++;
    if (!conn.pageInfo.hasNextPage) return { seen, pages, totalCount: conn.totalCount };
    after = conn.pageInfo.endCursor;
  }
}

describe('Relay connections beside the older lists', () => {
  it('pages the audit log newest first with a count, filters it, and agrees with the deprecated auditLog', async () => {
    for (let i = 0; i < 5; i++) await t.service.registerEndpoint(t.actor, { name: `audit.e${i}`, kind: 'HANDLER', handlerName: 'h' });
    const Q = `query ($first: Int, $after: String, $action: String) {
      auditLogConnection(first: $first, after: $after, action: $action) {
        totalCount edges { cursor node { id action targetType } } pageInfo { hasNextPage endCursor }
      }
    }`;
    const { seen, pages, totalCount } = await readAll(Q, (d) => d.auditLogConnection, 2, { action: 'endpoint.register' });
    expect(pages).toBe(3);
    expect(totalCount).toBe(5);
    expect(seen.map((e: any) => e.action)).toEqual(Array(5).fill('endpoint.register'));
    expect(new Set(seen.map((e: any) => e.id)).size).toBe(5);
    const old: any = await g.gql(`{ auditLog(action: "endpoint.register") { entries { id } } }`);
    expect(old.data.auditLog.entries.map((e: any) => e.id)).toEqual(seen.map((e: any) => e.id));
    // An entry is a Node: node(id:) finds it again.
    const node: any = await g.gql(`query ($id: ID!) { node(id: $id) { __typename id ... on AuditEntry { action } } }`, { id: seen[0].id });
    expect(node.data.node).toEqual({ __typename: 'AuditEntry', id: seen[0].id, action: 'endpoint.register' });
  });

  it('refuses the audit log to a non-ADMIN and a cursor of another list', async () => {
    const viewer = { ...t.actor, role: 'VIEWER' as const };
    const res: any = await g.gql(`{ auditLogConnection { totalCount } }`, {}, viewer);
    expect(res.errors[0].extensions.code).toBe('FORBIDDEN');
    const jobs: any = await g.gql(`{ auditLogConnection(first: 1) { pageInfo { endCursor } } }`);
    const bad: any = await g.gql(`query ($a: String) { apiKeyConnection(after: $a) { totalCount } }`, {
      a: jobs.data.auditLogConnection.pageInfo.endCursor,
    });
    expect(bad.errors[0].extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['after'] }] });
    // An audit entry's id is no Node for a VIEWER: it cannot read the log.
    const viewerNode: any = await g.gql(
      `query ($id: ID!) { node(id: $id) { id } }`,
      { id: jobs.data.auditLogConnection.pageInfo.endCursor },
      viewer,
    );
    expect(viewerNode.data.node).toBeNull();
  });

  it('pages API keys newest first, each once, with a count, and finds a key by node(id:)', async () => {
    const made: string[] = [];
    for (let i = 0; i < 4; i++) made.push((await t.service.createApiKey(t.actor, { name: `key-${i}`, role: 'VIEWER' })).apiKey.id);
    const Q = `query ($first: Int, $after: String) {
      apiKeyConnection(first: $first, after: $after) { totalCount edges { cursor node { id name } } pageInfo { hasNextPage endCursor } }
    }`;
    const { seen, totalCount } = await readAll(Q, (d) => d.apiKeyConnection, 3);
    expect(seen.map((k: any) => k.name)).toEqual(['key-3', 'key-2', 'key-1', 'key-0']);
    expect(totalCount).toBe(4);
    const old: any = await g.gql(`{ apiKeys { id } }`);
    expect(old.data.apiKeys.map((k: any) => k.id)).toEqual([...made].reverse());
    const node: any = await g.gql(`query ($id: ID!) { node(id: $id) { __typename ... on ApiKey { name } } }`, { id: made[1] });
    expect(node.data.node).toEqual({ __typename: 'ApiKey', name: 'key-1' });
    // Another workspace sees none of them.
    const other: any = await g.gql(`{ apiKeyConnection { totalCount nodes { id } } }`, {}, t.otherActor);
    expect(other.data.apiKeyConnection).toEqual({ totalCount: 0, nodes: [] });
  });

  it("pages a run's findings in the order recorded, filtered, counted, and as Nodes", async () => {
    const { run } = await t.service.triggerRun(t.actor, { name: 'scan.find', force: true });
    const ws = t.actor.workspaceId;
    for (let i = 0; i < 7; i++) {
      await t.query(`insert into findings (workspace_id, run_id, kind, severity, resource_id) values ($1, $2, $3, $4, $5)`, [
        ws,
        run.id,
        i % 2 ? 'odd' : 'even',
        i % 2 ? 'WARNING' : 'INFO',
        `r-${i}`,
      ]);
    }
    const Q = `query ($id: ID!, $first: Int, $after: String, $kind: String) {
      run(id: $id) {
        findingCounts { kind severity count }
        findingConnection(first: $first, after: $after, kind: $kind) {
          totalCount edges { cursor node { id resourceId } } pageInfo { hasNextPage endCursor }
        }
      }
    }`;
    const all = await readAll(Q, (d) => d.run.findingConnection, 3, { id: run.id });
    expect(all.seen.map((f: any) => f.resourceId)).toEqual(['r-0', 'r-1', 'r-2', 'r-3', 'r-4', 'r-5', 'r-6']);
    expect(all.totalCount).toBe(7);
    const odd = await readAll(Q, (d) => d.run.findingConnection, 2, { id: run.id, kind: 'odd' });
    expect(odd.seen.map((f: any) => f.resourceId)).toEqual(['r-1', 'r-3', 'r-5']);
    expect(odd.totalCount).toBe(3);
    const counts: any = await g.gql(Q, { id: run.id, first: 1 });
    expect(counts.data.run.findingCounts).toEqual([
      { kind: 'even', severity: 'INFO', count: 4 },
      { kind: 'odd', severity: 'WARNING', count: 3 },
    ]);
    // The same findings, with the same ids, through the deprecated page.
    const old: any = await g.gql(`query ($id: ID!) { run(id: $id) { findings { nodes { id } } } }`, { id: run.id });
    expect(old.data.run.findings.nodes.map((f: any) => f.id)).toEqual(all.seen.map((f: any) => f.id));
    const node: any = await g.gql(`query ($id: ID!) { node(id: $id) { __typename ... on Finding { resourceId } } }`, {
      id: all.seen[2].id,
    });
    expect(node.data.node).toEqual({ __typename: 'Finding', resourceId: 'r-2' });
    const elsewhere: any = await g.gql(`query ($id: ID!) { node(id: $id) { id } }`, { id: all.seen[2].id }, t.otherActor);
    expect(elsewhere.data.node).toBeNull();
  });

  it('pages the handler catalogue by kind then name, each once, with a count', async () => {
    const handlers = ['zeta', 'alpha', 'mid', 'beta'].map((name) => ({ kind: 'HANDLER', name }));
    handlers.push({ kind: 'INTERVAL', name: 'tick' } as any);
    await t.query(`insert into workers (id, host, pid, stale_ms, handlers) values ('w-relay', 'h', 1, 600000, $1)`, [
      JSON.stringify(handlers),
    ]);
    const Q = `query ($first: Int, $after: String, $kind: HandlerKind) {
      handlerConnection(first: $first, after: $after, kind: $kind) { totalCount edges { cursor node { kind name } } pageInfo { hasNextPage endCursor } }
    }`;
    const { seen, pages, totalCount } = await readAll(Q, (d) => d.handlerConnection, 2);
    const mine = seen.filter((h: any) => ['zeta', 'alpha', 'mid', 'beta', 'tick'].includes(h.name));
    expect(mine.map((h: any) => `${h.kind}:${h.name}`)).toEqual([
      'HANDLER:alpha',
      'HANDLER:beta',
      'HANDLER:mid',
      'HANDLER:zeta',
      'INTERVAL:tick',
    ]);
    expect(totalCount).toBe(seen.length);
    expect(pages).toBe(Math.ceil(seen.length / 2));
    const interval: any = await g.gql(Q, { kind: 'INTERVAL' });
    expect(interval.data.handlerConnection.edges.map((e: any) => e.node.name)).toContain('tick');
    expect(interval.data.handlerConnection.edges.every((e: any) => e.node.kind === 'INTERVAL')).toBe(true);
    const bad: any = await g.gql(Q, { after: 'bm90LWEtY3Vyc29y' });
    expect(bad.errors[0].extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['after'] }] });
  });

  it('marks the older lists deprecated, each pointing to its connection', async () => {
    const res: any = await g.gql(`{
      q: __type(name: "Query") { fields(includeDeprecated: true) { name deprecationReason } }
      r: __type(name: "Run") { fields(includeDeprecated: true) { name deprecationReason } }
    }`);
    const reason = (type: any, name: string) => type.fields.find((f: any) => f.name === name)?.deprecationReason;
    expect(reason(res.data.q, 'auditLog')).toMatch(/auditLogConnection/);
    expect(reason(res.data.q, 'apiKeys')).toMatch(/apiKeyConnection/);
    expect(reason(res.data.q, 'handlers')).toMatch(/handlerConnection/);
    expect(reason(res.data.r, 'findings')).toMatch(/findingConnection/);
    expect(reason(res.data.q, 'auditLogConnection')).toBeNull();
  });
});
