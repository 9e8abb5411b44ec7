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
});
