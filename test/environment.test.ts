import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sessions } from '../src/db/pooler.js';
import { ConfigError, parseConfig } from '../src/environment.js';

describe('configuration', () => {
  it('defaults to the embedded Postgres on port 4000 with data in ./.jobgate', () => {
    const c = parseConfig({}, '/srv/app');
    expect(c).toMatchObject({ databaseUrl: undefined, port: 4000, host: '127.0.0.1', dataDir: path.resolve('/srv/app/.jobgate') });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('reads a worker batch size: 0 (the concurrency) unless JOBGATE_WORKER_BATCH_SIZE says otherwise; names a bad one', () => {
    expect(parseConfig({}).worker.batchSize).toBe(0);
    expect(parseConfig({ JOBGATE_WORKER_BATCH_SIZE: '100' }).worker.batchSize).toBe(100);
    expect(() => parseConfig({ JOBGATE_WORKER_BATCH_SIZE: '-1' })).toThrow(/JOBGATE_WORKER_BATCH_SIZE/);
    expect(() => parseConfig({ JOBGATE_WORKER_BATCH_SIZE: 'many' })).toThrow(/JOBGATE_WORKER_BATCH_SIZE/);
  });

  it('bounds the wait for a pooled connection: 30 s unless DATABASE_POOL_WAIT_MS says otherwise', () => {
    expect(parseConfig({}).poolWaitMs).toBe(30_000);
    expect(parseConfig({ DATABASE_POOL_WAIT_MS: '5000' }).poolWaitMs).toBe(5000);
    expect(() => parseConfig({ DATABASE_POOL_WAIT_MS: '0' })).toThrow(/DATABASE_POOL_WAIT_MS/);
    // One connection cannot serve a run schedule's tick (it holds one while triggering on another).
    expect(() => parseConfig({ DATABASE_POOL_MAX: '1' })).toThrow(/DATABASE_POOL_MAX/);
  });

  it('reads JOBGATE_MIGRATIONS: apply by default, or verify; anything else names it', () => {
    expect(parseConfig({}).migrations).toBe('apply');
    expect(parseConfig({ JOBGATE_MIGRATIONS: 'verify' }).migrations).toBe('verify');
    expect(() => parseConfig({ JOBGATE_MIGRATIONS: 'skip' })).toThrow(/JOBGATE_MIGRATIONS/);
  });

  it('reads the bounds on load, defaults for the unset ones, 0 to turn one off, and names a bad one', () => {
    expect(parseConfig({}).bounds).toEqual({
      requestsPerSecond: 50,
      requestBurst: 200,
      requestsInFlightPerKey: 4,
      connectionsPerKey: 50,
      subscriptionsPerKey: 500,
      subscriptionsPerConnection: 100,
      failedAuthPerMinute: 20,
      connectionsPerAddress: 512,
    });
    const c = parseConfig({
      JOBGATE_RATE_LIMIT_PER_SECOND: '0',
      JOBGATE_RATE_LIMIT_BURST: '10',
      JOBGATE_MAX_REQUESTS_IN_FLIGHT_PER_KEY: '2',
      JOBGATE_MAX_CONNECTIONS_PER_KEY: '3',
      JOBGATE_MAX_SUBSCRIPTIONS_PER_KEY: '4',
      JOBGATE_MAX_SUBSCRIPTIONS_PER_CONNECTION: '5',
      JOBGATE_FAILED_AUTH_PER_MINUTE: '6',
      JOBGATE_MAX_CONNECTIONS_PER_ADDRESS: '7',
      JOBGATE_TRUSTED_PROXIES: '10.0.0.0/8, 192.0.2.1',
    });
    expect(c.bounds).toEqual({
      requestsPerSecond: 0,
      requestBurst: 10,
      requestsInFlightPerKey: 2,
      connectionsPerKey: 3,
      subscriptionsPerKey: 4,
      subscriptionsPerConnection: 5,
      failedAuthPerMinute: 6,
      connectionsPerAddress: 7,
    });
    expect(c.trustedProxies).toEqual(['10.0.0.0/8', '192.0.2.1']);
    expect(parseConfig({}).trustedProxies).toEqual([]);
    expect(() => parseConfig({ JOBGATE_RATE_LIMIT_BURST: '0' })).toThrow(/JOBGATE_RATE_LIMIT_BURST/);
    expect(() => parseConfig({ JOBGATE_MAX_CONNECTIONS_PER_KEY: 'many' })).toThrow(/JOBGATE_MAX_CONNECTIONS_PER_KEY/);
    expect(() => parseConfig({ JOBGATE_TRUSTED_PROXIES: 'proxy.internal' })).toThrow(/JOBGATE_TRUSTED_PROXIES/);
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

  it('reads a transaction pooler: unnamed statements and LISTEN only where told, unless said otherwise; names a bad value', () => {
    const direct = parseConfig({ DATABASE_URL: 'postgres://db.internal/jobgate' });
    expect(direct).toMatchObject({ pooler: undefined, listenDatabaseUrl: undefined, preparedStatements: undefined });
    expect(sessions({ connectionString: direct.databaseUrl!, ...direct })).toEqual({
      listen: 'postgres://db.internal/jobgate',
      preparedStatements: true,
      startupOptions: true,
    });

    const pooled = parseConfig({ DATABASE_URL: 'postgres://bouncer:6432/jobgate', JOBGATE_DATABASE_POOLER: 'transaction' });
    expect(sessions({ connectionString: pooled.databaseUrl!, ...pooled })).toEqual({
      listen: null,
      preparedStatements: false,
      startupOptions: false,
    });
    const told = parseConfig({
      DATABASE_URL: 'postgres://bouncer:6432/jobgate',
      JOBGATE_DATABASE_POOLER: 'transaction',
      JOBGATE_LISTEN_DATABASE_URL: 'postgres://db.internal:5432/jobgate',
      JOBGATE_PREPARED_STATEMENTS: 'on',
    });
    // Prepared statements through a pooler that tracks them, and still nothing at connect: a pooler refuses startup parameters.
    expect(sessions({ connectionString: told.databaseUrl!, listenConnectionString: told.listenDatabaseUrl, ...told })).toEqual({
      listen: 'postgres://db.internal:5432/jobgate',
      preparedStatements: true,
      startupOptions: false,
    });
    expect(parseConfig({ JOBGATE_DATABASE_POOLER: 'none' }).pooler).toBeUndefined();

    expect(() => parseConfig({ JOBGATE_DATABASE_POOLER: 'session' })).toThrow(/JOBGATE_DATABASE_POOLER: must be none or transaction/);
    expect(() => parseConfig({ JOBGATE_LISTEN_DATABASE_URL: 'mysql://db/jobgate' })).toThrow(
      /JOBGATE_LISTEN_DATABASE_URL: must be a postgres/,
    );
    expect(() => parseConfig({ JOBGATE_PREPARED_STATEMENTS: 'yes' })).toThrow(/JOBGATE_PREPARED_STATEMENTS/);
  });

  it('reads a read replica and its staleness bound (5 s unless said), naming a bad value', () => {
    expect(parseConfig({}).readReplica).toBeUndefined();
    expect(parseConfig({ JOBGATE_READ_DATABASE_URL: 'postgres://replica/jobgate' }).readReplica).toEqual({
      connectionString: 'postgres://replica/jobgate',
      maxLagMs: 5000,
    });
    expect(
      parseConfig({ JOBGATE_READ_DATABASE_URL: 'postgres://replica/jobgate', JOBGATE_READ_MAX_LAG_MS: '1000' }).readReplica?.maxLagMs,
    ).toBe(1000);
    expect(() => parseConfig({ JOBGATE_READ_DATABASE_URL: 'replica:5432' })).toThrow(/JOBGATE_READ_DATABASE_URL: must be a postgres/);
    expect(() => parseConfig({ JOBGATE_READ_MAX_LAG_MS: '10' })).toThrow(/JOBGATE_READ_MAX_LAG_MS/);
  });

  it('registers the demo handlers by default on the embedded default outside production only; JOBGATE_DEMO_HANDLERS decides otherwise', () => {
    expect(parseConfig({}).demoHandlers).toBe(true);
    expect(parseConfig({ NODE_ENV: 'production' }).demoHandlers).toBe(false);
    expect(parseConfig({ DATABASE_URL: 'postgres://db.internal/jobgate' }).demoHandlers).toBe(false);
    expect(parseConfig({ DATABASE_URL: 'postgres://db.internal/jobgate', JOBGATE_DEMO_HANDLERS: 'on' }).demoHandlers).toBe(true);
    expect(parseConfig({ JOBGATE_DEMO_HANDLERS: 'off' }).demoHandlers).toBe(false);
    expect(() => parseConfig({ JOBGATE_DEMO_HANDLERS: 'yes' })).toThrow(/JOBGATE_DEMO_HANDLERS/);
  });
});
