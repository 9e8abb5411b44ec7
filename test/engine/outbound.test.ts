import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOutboundPolicy, embeddedIPv4 } from '../../src/service/endpoints/outbound-policy.js';
import { codeOf, createTestDb, type TestDb } from '../support/db.js';
import { engineHarness, settled, type EngineHarness } from '../support/engine.js';
import { startHttpTarget, type HttpTarget } from '../support/http-target.js';

describe('outbound address policy', () => {
  const policy = createOutboundPolicy();

  it.each([
    '127.0.0.1',
    '127.255.0.9',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '::1',
    '::',
    'fe80::1',
    'fd00:ec2::254',
    'fc00::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::127.0.0.1',
    '64:ff9b::a9fe:a9fe',
    '2002:7f00:1::',
    '::ffff:0:a00:1',
    '2001:0:4136:e378:8000:63bf:80ff:fffe', // Teredo, client 127.0.0.1 (stored inverted)
    '2001:0:4136:e378:8000:63bf:f5ff:fffe', // Teredo, client 10.0.0.1
    '64:ff9b:1::a00:1', // local-use NAT64 (RFC 8215)
    '100::1', // discard-only
    '2001:2::1', // benchmarking
    '3fff::1', // documentation (RFC 9637)
  ])('refuses %s', (address) => {
    expect(policy.refusal(address)).toMatch(/special-purpose/);
  });

  it.each(['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8', '2001:0:4136:e378:8000:63bf:f7f7:f7f7'])(
    'allows public %s',
    (address) => {
      expect(policy.refusal(address)).toBeUndefined();
    },
  );

  it('reads the IPv4 address inside IPv6 forms that route to it', () => {
    expect(embeddedIPv4('::ffff:10.0.0.1')).toBe('10.0.0.1');
    expect(embeddedIPv4('64:ff9b::7f00:1')).toBe('127.0.0.1');
    expect(embeddedIPv4('2002:a9fe:a9fe::1')).toBe('169.254.169.254');
    expect(embeddedIPv4('2001:0:4136:e378:8000:63bf:3fff:fdd2')).toBe('192.0.2.45'); // Teredo (RFC 4380's example)
    expect(embeddedIPv4('2606:4700::1111')).toBeUndefined();
  });

  it('lets an operator allow a range explicitly', () => {
    const allowed = createOutboundPolicy(['127.0.0.0/8', '10.20.0.0/16']);
    expect(allowed.refusal('127.0.0.1')).toBeUndefined();
    expect(allowed.refusal('::ffff:127.0.0.1')).toBeUndefined();
    expect(allowed.refusal('10.20.3.4')).toBeUndefined();
    expect(allowed.refusal('10.21.3.4')).toMatch(/special-purpose/);
  });
});

describe('SSRF refusal at delivery', () => {
  let t: TestDb;
  let h: EngineHarness;
  let target: HttpTarget;

  beforeAll(async () => {
    t = await createTestDb();
    target = await startHttpTarget();
    target.route('/secret', (_req, res) => res.writeHead(200).end('internal data'));
    h = engineHarness(t);
    await h.worker(); // default policy: no private addresses allowed
  });
  afterAll(async () => {
    await h.stopAll();
    await target.close();
    await t.close();
  });

  const spellings = () => [
    ['a loopback literal', `http://127.0.0.1:${target.port}/secret`],
    ['a hostname that resolves to loopback', `http://localhost:${target.port}/secret`],
    ['a decimal IPv4 spelling', `http://2130706433:${target.port}/secret`],
    ['a hex IPv4 spelling', `http://0x7f.0.0.1:${target.port}/secret`],
    ['an octal IPv4 spelling', `http://0177.0.0.1:${target.port}/secret`],
    ['an IPv4-mapped IPv6 literal', `http://[::ffff:127.0.0.1]:${target.port}/secret`],
    ['the IPv6 loopback', `http://[::1]:${target.port}/secret`],
  ];

  it('refuses every spelling of a loopback target, without retries, and the target sees nothing', async () => {
    let i = 0;
    for (const [what, url] of spellings()) {
      const name = `ssrf.case-${i++}`;
      await t.service.registerEndpoint(t.actor, { name, kind: 'HTTP', url: url!, maxAttempts: 3 });
      const { job } = await t.service.createJob(t.actor, { endpointName: name, kind: 'IMMEDIATE' });
      const ex = await settled(t, job.id);
      expect(ex.status, what).toBe('FAILED');
      expect(ex.attempt_count, what).toBe(1);
      expect(ex.last_error, what).toMatch(/refused to connect/);
    }
    expect(target.hitsOf('/secret')).toHaveLength(0);
  });

  it('refuses non-http(s) schemes when the endpoint is registered', async () => {
    for (const url of ['file:///etc/passwd', 'gopher://127.0.0.1/', 'ftp://example.com/x']) {
      expect(await codeOf(() => t.service.registerEndpoint(t.actor, { name: 'bad.scheme', kind: 'HTTP', url }))).toBe('VALIDATION_FAILED');
    }
  });
});
