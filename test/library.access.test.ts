/**
 * Access gaps closed: a workspace never loses its last ADMIN key (through GraphQL and the
 * library alike), and the embedding application creates workspaces from the library.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobgate, type Jobgate } from '../src/index.js';
import { codeOf, createTestDb, type TestDb } from './support/db.js';
import { createTestGateway, type TestGateway } from './support/graphql.js';

let t: TestDb;
let gate: Jobgate;
let g: TestGateway;

beforeAll(async () => {
  t = await createTestDb();
  gate = await createJobgate({ databaseUrl: t.url, migrate: false });
  g = createTestGateway(t);
});
afterAll(async () => {
  await gate?.close();
  await g?.close();
  await t?.close();
});

const REVOKE = 'mutation ($id: ID!) { revokeApiKey(id: $id) { revokedAt } }';

describe('the last ADMIN key', () => {
  it('cannot be revoked: CONFLICT naming the reason, and the key keeps working', async () => {
    const { workspace, adminKey } = await gate.client.createWorkspace({ slug: 'solo', name: 'Solo' });
    const actor = await gate.actor('solo');
    const res = await g.gql(REVOKE, { id: adminKey.apiKey.id }, actor);
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT' });
    expect(res.errors?.[0]?.message).toMatch(/last ADMIN key/);
    expect(await codeOf(() => gate.as(actor).revokeApiKey(adminKey.apiKey.id))).toBe('CONFLICT');
    expect((await t.query(`select revoked_at from api_keys where id = $1`, [adminKey.apiKey.id])).rows[0].revoked_at).toBeNull();
    expect((await t.service.authenticate(adminKey.key)).workspaceId).toBe(workspace.id);
    // Both refusals are on record with their code.
    expect(
      (await t.query(`select result_code from audit_log where action = 'apiKey.revoke' and workspace_id = $1`, [workspace.id])).rows,
    ).toEqual([{ result_code: 'CONFLICT' }, { result_code: 'CONFLICT' }]);
  });

  it('leaves exactly one ADMIN key when the last two are revoked at the same time', async () => {
    const { adminKey: first } = await gate.client.createWorkspace({ slug: 'duo', name: 'Duo' });
    const actor = await gate.actor('duo');
    const second = await gate.as(actor).createApiKey({ name: 'second admin', role: 'ADMIN' });
    const viewer = await gate.as(actor).createApiKey({ name: 'a viewer', role: 'VIEWER' });
    const results = await Promise.all([first.apiKey.id, second.apiKey.id].map((id) => g.gql(REVOKE, { id }, actor)));
    const codes = results.map((r) => r.errors?.[0]?.extensions?.code ?? 'OK').sort();
    expect(codes).toEqual(['CONFLICT', 'OK']);
    const { rows } = await t.query(`select count(*)::int as n from api_keys k join workspaces w on w.id = k.workspace_id
                                    where w.slug = 'duo' and k.role = 'ADMIN' and k.revoked_at is null`);
    expect(rows[0].n).toBe(1);
    // Other keys revoke as before.
    expect((await g.gql(REVOKE, { id: viewer.apiKey.id }, actor)).data.revokeApiKey.revokedAt).toEqual(expect.any(String));
  });
});

describe('createWorkspace from the library', () => {
  it('creates the workspace with its first ADMIN key and reaper; an actor on behalf of a plain key may not', async () => {
    const { workspace, adminKey } = await gate.client.createWorkspace({ slug: 'embedded', name: 'Embedded' });
    expect(workspace.slug).toBe('embedded');
    expect((await t.service.authenticate(adminKey.key)).role).toBe('ADMIN');
    expect(
      (await t.query(`select count(*)::int as n from jobs where workspace_id = $1 and name = 'reaper'`, [workspace.id])).rows[0].n,
    ).toBe(1);
    expect(await codeOf(() => gate.client.createWorkspace({ slug: 'embedded', name: 'Again' }))).toBe('CONFLICT');
    const onBehalf = await gate.actor('embedded', 'ADMIN', adminKey.apiKey.id);
    expect(await codeOf(() => gate.as(onBehalf).createWorkspace({ slug: 'sneaky', name: 'Sneaky' }))).toBe('FORBIDDEN');
  });
});
