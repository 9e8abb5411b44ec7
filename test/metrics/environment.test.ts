/**
 * The metrics and health settings in src/environment.ts: defaults, bounds, and every bad one named.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/environment.js';

describe('metrics and health configuration', () => {
  it('defaults to no /metrics route, no metrics port, 100 endpoint names and no shutdown delay', () => {
    const c = parseConfig({});
    expect(c.metrics).toEqual({ token: undefined, port: undefined, endpointLabels: 100 });
    expect(c.shutdownDelayMs).toBe(0);
    expect(Object.isFrozen(c.metrics)).toBe(true);
    expect(parseConfig({ JOBGATE_METRICS_TOKEN: '', JOBGATE_METRICS_PORT: '' }).metrics).toMatchObject({
      token: undefined,
      port: undefined,
    });
  });

  it('reads the token, the port (0 picks one), the endpoint cap and the delay', () => {
    const c = parseConfig({
      JOBGATE_METRICS_TOKEN: 'abcdefghijklmnop',
      JOBGATE_METRICS_PORT: '0',
      JOBGATE_METRICS_ENDPOINT_LABELS: '20',
      JOBGATE_SHUTDOWN_DELAY_MS: '5000',
    });
    expect(c.metrics).toEqual({ token: 'abcdefghijklmnop', port: 0, endpointLabels: 20 });
    expect(c.shutdownDelayMs).toBe(5000);
    expect(parseConfig({ JOBGATE_METRICS_PORT: '9464' }).metrics.port).toBe(9464);
  });

  it('names every bad metrics variable at once', () => {
    try {
      parseConfig({
        JOBGATE_METRICS_TOKEN: 'short',
        JOBGATE_METRICS_PORT: '70000',
        JOBGATE_METRICS_ENDPOINT_LABELS: '0',
        JOBGATE_SHUTDOWN_DELAY_MS: '-1',
      });
      throw new Error('accepted');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      const message = (error as Error).message;
      for (const name of ['JOBGATE_METRICS_TOKEN', 'JOBGATE_METRICS_PORT', 'JOBGATE_METRICS_ENDPOINT_LABELS', 'JOBGATE_SHUTDOWN_DELAY_MS'])
        expect(message).toContain(name);
      // The bad token itself is not repeated.
      expect(message).not.toContain('short');
    }
    // A token with a space cannot be sent as one bearer token.
    expect(() => parseConfig({ JOBGATE_METRICS_TOKEN: 'abcdefgh ijklmnopq' })).toThrow(/JOBGATE_METRICS_TOKEN/);
    expect(() => parseConfig({ JOBGATE_METRICS_PORT: 'nine' })).toThrow(/JOBGATE_METRICS_PORT/);
    // The gateway's own port already serves them.
    expect(() => parseConfig({ PORT: '4000', JOBGATE_METRICS_PORT: '4000' })).toThrow(/JOBGATE_METRICS_PORT: must differ from PORT/);
    expect(() => parseConfig({ JOBGATE_METRICS_PORT: '4000' })).toThrow(/JOBGATE_METRICS_PORT/);
    expect(parseConfig({ PORT: '0', JOBGATE_METRICS_PORT: '0' }).metrics.port).toBe(0);
  });
});
