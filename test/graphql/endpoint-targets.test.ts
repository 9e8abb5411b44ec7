/**
 * Validation at the door: an endpoint whose url is an IP literal the outbound policy refuses is
 * refused when it is registered or updated (VALIDATION_FAILED at `url`, nothing written); a host
 * name that resolves only to refused addresses is accepted, with `targetWarnings` saying so,
 * since DNS can change; the check at delivery stays the authority.
 */
import dns from 'node:dns';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { HostLookups } from '../../src/service/endpoints/outbound-policy.js';
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

  it('accepts a host name that resolves only to refused addresses, with a warning that does not list them', async () => {
    const res = await g.gql(REGISTER, { input: { name: 'door.localhost', kind: 'HTTP', url: 'http://localhost:8080/hook' } });
    expect(res.errors).toBeUndefined();
    const [warning, ...rest] = res.data.registerEndpoint.targetWarnings;
    expect(rest).toEqual([]);
    expect(warning.code).toBe('TARGET_RESOLVES_TO_REFUSED_ADDRESS');
    expect(warning.message).toMatch(/localhost resolves only to addresses the outbound policy refuses/);
    expect(warning.message).not.toMatch(/127\.0\.0\.1|::1/);
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

/** A lookup that answers when told to, counting calls and how many ran at once. */
function heldLookup(answer: (host: string) => string[] | Error) {
  const state = { calls: [] as string[], running: 0, most: 0 };
  const held = new Map<string, () => void>();
  const lookup = async (host: string) => {
    state.calls.push(host);
    state.most = Math.max(state.most, ++state.running);
    await new Promise<void>((resolve) => held.set(host, resolve));
    state.running--;
    const a = answer(host);
    if (a instanceof Error) throw a;
    return a;
  };
  const release = async (host: string) => {
    // The lookup starts a turn of the event loop after it is asked for.
    for (let i = 0; !held.has(host) && i < 100; i++) await new Promise((resolve) => setImmediate(resolve));
    held.get(host)!();
    held.delete(host);
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { state, lookup, release };
}

describe('target lookups', () => {
  it('a list of endpoints looks each host name up once, at most 2 at a time, and remembers the answers', async () => {
    const state = { calls: [] as string[], running: 0, most: 0 };
    const original = dns.promises.lookup;
    const spy = vi.spyOn(dns.promises, 'lookup').mockImplementation((async (host: string, options: dns.LookupAllOptions) => {
      if (!host.endsWith('.list.invalid')) return original(host, options);
      state.calls.push(host);
      state.most = Math.max(state.most, ++state.running);
      await new Promise((resolve) => setTimeout(resolve, 40));
      state.running--;
      return [{ address: '10.99.0.1', family: 4 }];
    }) as typeof dns.promises.lookup);
    try {
      for (let i = 0; i < 30; i++)
        await t.service.registerEndpoint(t.actor, { name: `list.e${i}`, kind: 'HTTP', url: `https://h${i % 10}.list.invalid/hook/${i}` });
      const LIST = `{ endpoints(first: 100) { nodes { name targetWarnings { code message } } } }`;
      const res: any = await g.gql(LIST);
      expect(res.errors).toBeUndefined();
      const listed = res.data.endpoints.nodes.filter((n: any) => n.name.startsWith('list.'));
      expect(listed).toHaveLength(30);
      for (const n of listed)
        expect(
          n.targetWarnings.map((w: any) => w.code),
          n.name,
        ).toEqual(['TARGET_RESOLVES_TO_REFUSED_ADDRESS']);
      expect(state.calls.sort()).toEqual(Array.from({ length: 10 }, (_, i) => `h${i}.list.invalid`).sort());
      expect(state.most).toBeLessThanOrEqual(2);
      expect(listed[0].targetWarnings[0].message).not.toContain('10.99.0.1');
      // Asked again within the minute: from memory, no lookup.
      const again: any = await g.gql(LIST);
      expect(again.errors).toBeUndefined();
      expect(state.calls).toHaveLength(10);
    } finally {
      spy.mockRestore();
    }
  });

  it('shares a running lookup, caps concurrency, answers "not checked" past the wait, and forgets after the ttl', async () => {
    let now = 0;
    const { state, lookup, release } = heldLookup((host) =>
      host === 'gone' ? Object.assign(new Error('x'), { code: 'ENOTFOUND' }) : ['10.0.0.1'],
    );
    const lookups = new HostLookups({ lookup, now: () => now, ttlMs: 60_000, errorTtlMs: 10_000, maxConcurrent: 2 });
    // Three callers, one lookup.
    const same = Promise.all([lookups.resolve('a', 1000), lookups.resolve('a', 1000), lookups.resolve('a', 1000)]);
    await release('a');
    expect(await same).toEqual([{ addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.1'] }]);
    expect(state.calls).toEqual(['a']);
    // Three names, two slots, no answer within the wait: the two started time out, the third is not checked.
    const three = await Promise.all(['b', 'c', 'd'].map((h) => lookups.resolve(h, 30)));
    expect(three).toEqual(['timeout', 'timeout', 'not-checked']);
    expect(state.most).toBe(2);
    expect(state.calls).toEqual(['a', 'b', 'c']);
    // The lookups that outlived their wait still finish and are remembered; the one no one waits for any more is dropped.
    await release('b');
    await release('c');
    expect(state.calls).toEqual(['a', 'b', 'c']);
    expect(await lookups.resolve('b', 10)).toEqual({ addresses: ['10.0.0.1'] });
    expect(await lookups.resolve('c', 10)).toEqual({ addresses: ['10.0.0.1'] });
    const gone = lookups.resolve('gone', 1000);
    await release('gone');
    expect(await gone).toEqual({ error: 'ENOTFOUND' });
    expect(await lookups.resolve('gone', 10)).toEqual({ error: 'ENOTFOUND' });
    expect(state.calls).toEqual(['a', 'b', 'c', 'gone']);
    // Errors are forgotten after errorTtlMs, answers after ttlMs.
    now += 11_000;
    const again = lookups.resolve('gone', 1000);
    expect(await lookups.resolve('a', 10)).toEqual({ addresses: ['10.0.0.1'] });
    await release('gone');
    await again;
    expect(state.calls).toEqual(['a', 'b', 'c', 'gone', 'gone']);
    now += 50_000;
    const later = lookups.resolve('a', 1000);
    await release('a');
    await later;
    expect(state.calls).toEqual(['a', 'b', 'c', 'gone', 'gone', 'a']);
  });
});
