import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../src/config.js';

describe('configuration', () => {
  it('defaults to the embedded Postgres on port 4000 with data in ./.jobgate', () => {
    const c = parseConfig({}, '/srv/app');
    expect(c).toMatchObject({ databaseUrl: undefined, port: 4000, host: '127.0.0.1', dataDir: path.resolve('/srv/app/.jobgate') });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('bounds the wait for a pooled connection: 30 s unless DATABASE_POOL_WAIT_MS says otherwise', () => {
    expect(parseConfig({}).poolWaitMs).toBe(30_000);
    expect(parseConfig({ DATABASE_POOL_WAIT_MS: '5000' }).poolWaitMs).toBe(5000);
    expect(() => parseConfig({ DATABASE_POOL_WAIT_MS: '0' })).toThrow(/DATABASE_POOL_WAIT_MS/);
    // One connection cannot serve a run schedule's tick (it holds one while triggering on another).
    expect(() => parseConfig({ DATABASE_POOL_MAX: '1' })).toThrow(/DATABASE_POOL_MAX/);
  });

  it('treats an empty DATABASE_URL as unset', () => {
    expect(parseConfig({ DATABASE_URL: '' }).databaseUrl).toBeUndefined();
  });

  it('names every bad variable at once', () => {
    try {
      parseConfig({ PORT: 'eighty', DATABASE_URL: 'mysql://x', JOBGATE_LOG_LEVEL: 'loud' });
      throw new Error('accepted');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      const message = (error as Error).message;
      for (const name of ['PORT', 'DATABASE_URL', 'JOBGATE_LOG_LEVEL']) expect(message).toContain(name);
    }
  });

  it('treats an empty HOST or JOBGATE_DATA_DIR as unset, like every other variable', () => {
    // An empty HOST made Node listen on every interface; an empty JOBGATE_DATA_DIR put the
    // cluster, the admin key and the secret key in the working directory itself.
    expect(parseConfig({ HOST: '', JOBGATE_DATA_DIR: '' }, '/srv/app')).toMatchObject({
      host: '127.0.0.1',
      dataDir: path.resolve('/srv/app/.jobgate'),
    });
  });

  it('refuses a blank or non-decimal number instead of reading it as another number', () => {
    // Number(' ') is 0: PORT=" " picked a random port and JOBGATE_SHUTDOWN_GRACE_MS=" " no grace.
    for (const [name, value] of [
      ['PORT', ' '],
      ['JOBGATE_SHUTDOWN_GRACE_MS', '  '],
      ['PORT', '0x10'],
      ['JOBGATE_LEASE_MS', '3e4'],
      ['DATABASE_POOL_MAX', '10.0'],
    ] as const) {
      expect(() => parseConfig({ [name]: value }), `${name}=${JSON.stringify(value)}`).toThrow(
        new RegExp(`${name}: must be a whole number`),
      );
    }
    expect(parseConfig({ PORT: ' 4001 ' }).port).toBe(4001);
  });

  it('refuses a JOBGATE_OUTBOUND_ALLOW entry that is not an IP address or CIDR, naming the variable', () => {
    for (const value of ['cafe', '999.1.1.1', '10.0.0.0/33', '::1/129', '127.0.0.0/8,beef']) {
      expect(() => parseConfig({ JOBGATE_OUTBOUND_ALLOW: value }), value).toThrow(/JOBGATE_OUTBOUND_ALLOW/);
    }
    expect(parseConfig({ JOBGATE_OUTBOUND_ALLOW: ' 127.0.0.0/8 , ::1, 10.1.2.3 ' }).worker.outboundAllow).toEqual([
      '127.0.0.0/8',
      '::1',
      '10.1.2.3',
    ]);
  });

  it('refuses a DATABASE_URL that cannot be parsed, naming the variable', () => {
    // A password with an unencoded "#" or "/" breaks the URL; pg used to say only "Invalid URL".
    for (const value of ['postgres://u:p@h:abc/db', 'postgres://jobgate:pa#ss@db.internal/jobgate']) {
      expect(() => parseConfig({ DATABASE_URL: value }), value).toThrow(/DATABASE_URL: .*percent-encode/);
    }
    expect(parseConfig({ DATABASE_URL: 'postgres://jobgate:pa%23ss@db.internal:6543/jobgate?sslmode=require' }).databaseUrl).toBe(
      'postgres://jobgate:pa%23ss@db.internal:6543/jobgate?sslmode=require',
    );
    expect(parseConfig({ DATABASE_URL: 'postgresql:///jobgate?host=/var/run/postgresql' }).databaseUrl).toBeDefined();
  });
});
