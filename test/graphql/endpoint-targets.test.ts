/**
 * Validation at the door: an endpoint whose url is an IP literal the outbound policy refuses is
 * refused when it is registered or updated (VALIDATION_FAILED at `url`, nothing written); a host
 * name that resolves only to refused addresses is accepted, with `targetWarnings` saying so,
 * since DNS can change; the check at delivery stays the authority.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.js';
import { createTestGateway, type TestGateway } from '../support/graphql.js';

let t: TestDb;
let g: TestGateway;
beforeAll(async () => {
  // The default policy: nothing private allowed, except the one range this installation allows.
  t = await createTestDb({ outboundAllow: ['10.20.0.0/16'] });
  g = createTestGateway(t);
});
afterAll(() => t.close());

const REGISTER = `mutation ($input: RegisterEndpointInput!) {
  registerEndpoint(input: $input) { id url targetWarnings { code message } }
}`;
const UPDATE = `mutation ($input: UpdateEndpointInput!) {
  updateEndpoint(input: $input) { id url targetWarnings { code message } }
}`;
const endpointCount = async () => (await t.query(`select count(*)::int as n from endpoints where name like 'door.%'`)).rows[0].n as number;

describe('endpoint targets at the door', () => {
  it.each([
    ['the cloud metadata address', 'http://169.254.169.254/latest/meta-data/'],
    ['loopback', 'http://127.0.0.1:8080/hook'],
    ['loopback in decimal', 'http://2130706433/hook'],
    ['a private range', 'https://192.168.1.10/hook'],
    ['a private range next to an allowed one', 'http://10.21.0.1/hook'],
    ['the IPv6 loopback', 'http://[::1]:9000/hook'],
    ['an IPv4-mapped IPv6 loopback', 'http://[::ffff:127.0.0.1]/hook'],
    ['the AWS IPv6 metadata address', 'http://[fd00:ec2::254]/latest'],
  ])('refuses %s with VALIDATION_FAILED at url, and writes nothing', async (_what, url) => {
    const before = await endpointCount();
    const res = await g.gql(REGISTER, { input: { name: `door.refused-${before}`, kind: 'HTTP', url } });
    expect(res.data).toBeNull();
    expect(res.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['url'] }] });
    expect(res.errors![0]!.extensions!.issues[0].message).toMatch(/JOBGATE_OUTBOUND_ALLOW/);
    expect(await endpointCount()).toBe(before);
  });

  it('accepts public and allowed literals without a warning', async () => {
    for (const [i, url] of ['https://93.184.216.34/hook', 'http://10.20.3.4:8080/hook', 'https://[2606:4700:4700::1111]/hook'].entries()) {
      const res = await g.gql(REGISTER, { input: { name: `door.ok-${i}`, kind: 'HTTP', url } });
      expect(res.errors, url).toBeUndefined();
      expect(res.data.registerEndpoint).toMatchObject({ url, targetWarnings: [] });
    }
  });

  it('accepts a host name that resolves only to refused addresses, with a warning naming them', async () => {
    const res = await g.gql(REGISTER, { input: { name: 'door.localhost', kind: 'HTTP', url: 'http://localhost:8080/hook' } });
    expect(res.errors).toBeUndefined();
    const [warning, ...rest] = res.data.registerEndpoint.targetWarnings;
    expect(rest).toEqual([]);
    expect(warning.code).toBe('TARGET_RESOLVES_TO_REFUSED_ADDRESS');
    expect(warning.message).toMatch(/localhost resolves to .*(127\.0\.0\.1|::1)/);
    // The same advice when the endpoint is read again.
    const read: any = await g.gql(`query ($id: ID!) { endpoint(id: $id) { targetWarnings { code } } }`, {
      id: res.data.registerEndpoint.id,
    });
    expect(read.data.endpoint.targetWarnings).toEqual([{ code: 'TARGET_RESOLVES_TO_REFUSED_ADDRESS' }]);
  });

  it('warns about a host name that does not resolve', async () => {
    const res = await g.gql(REGISTER, { input: { name: 'door.nowhere', kind: 'HTTP', url: 'https://no-such-host.invalid/hook' } });
    expect(res.errors).toBeUndefined();
    expect(res.data.registerEndpoint.targetWarnings.map((w: any) => w.code)).toEqual(['TARGET_DOES_NOT_RESOLVE']);
  });

  it('does not judge a templated host, nor a HANDLER endpoint', async () => {
    const templated = await g.gql(REGISTER, { input: { name: 'door.templated', kind: 'HTTP', url: 'https://{{config.host}}/hook' } });
    expect(templated.errors).toBeUndefined();
    expect(templated.data.registerEndpoint.targetWarnings).toEqual([]);
    const handler = await g.gql(REGISTER, { input: { name: 'door.handler', kind: 'HANDLER', handlerName: 'h' } });
    expect(handler.data.registerEndpoint.targetWarnings).toEqual([]);
  });

  it('refuses an update to a refused literal and keeps the url; warns on an update to such a name', async () => {
    const created: any = await g.gql(REGISTER, { input: { name: 'door.moving', kind: 'HTTP', url: 'https://93.184.216.34/a' } });
    const id = created.data.registerEndpoint.id;
    const refused = await g.gql(UPDATE, { input: { id, url: 'http://169.254.169.254/latest' } });
    expect(refused.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_FAILED', issues: [{ path: ['url'] }] });
    expect((await t.query(`select url from endpoints where id = $1`, [id])).rows[0].url).toBe('https://93.184.216.34/a');
    const warned = await g.gql(UPDATE, { input: { id, url: 'http://localhost/b' } });
    expect(warned.errors).toBeUndefined();
    expect(warned.data.updateEndpoint.targetWarnings.map((w: any) => w.code)).toEqual(['TARGET_RESOLVES_TO_REFUSED_ADDRESS']);
    // An update that leaves the url alone is not refused for it.
    const other = await g.gql(`mutation ($id: ID!) { updateEndpoint(input: { id: $id, description: "still here" }) { description } }`, {
      id,
    });
    expect(other.errors).toBeUndefined();
  });

  it('holds the library to the same door', async () => {
    await expect(
      t.service.registerEndpoint(t.actor, { name: 'door.lib', kind: 'HTTP', url: 'http://169.254.169.254/' }),
    ).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });
});
