import { describe, expect, it } from 'vitest';
import { executionSearchParams, executionSearchText } from '../src/lib/execution-search.ts';

const endpoints = [
  { id: 'e1', name: 'billing.send-invoice' },
  { id: 'e2', name: 'billing.refund' },
  { id: 'e3', name: 'mail.welcome' },
];

describe("the Executions screen's search", () => {
  it("reads the issue's example into the status, endpoint and error parameters", () => {
    expect(executionSearchParams('status:failed endpoint:mail error:"timeout"', endpoints)).toEqual({
      status: 'FAILED',
      endpoint: 'e3',
      error: 'timeout',
      q: null,
    });
  });

  it('names an endpoint by its whole name in any case, or by a part only one name holds', () => {
    expect(executionSearchParams('endpoint:BILLING.REFUND', endpoints).endpoint).toBe('e2');
    expect(executionSearchParams('endpoint:invoice', endpoints).endpoint).toBe('e1');
  });

  it('keeps in the free text a status or an endpoint that names none, or more than one', () => {
    expect(executionSearchParams('status:dead endpoint:billing nightly', endpoints)).toEqual({
      error: null,
      q: 'nightly status:dead endpoint:billing',
    });
  });

  it('clears the error and free text a new search leaves out, and leaves status and endpoint to their controls', () => {
    expect(executionSearchParams('', endpoints)).toEqual({ error: null, q: null });
  });

  it('shows the URL search back in the box, quoting an error with spaces, so that it reads the same', () => {
    const url = new URLSearchParams({ error: 'read timed out', q: 'nightly', status: 'FAILED' });
    const text = executionSearchText(url);
    expect(text).toBe('error:"read timed out" nightly');
    expect(executionSearchParams(text, endpoints)).toEqual({ error: 'read timed out', q: 'nightly' });
    expect(executionSearchText(new URLSearchParams({ error: 'ECONNRESET' }))).toBe('error:ECONNRESET');
    expect(executionSearchText(new URLSearchParams())).toBe('');
  });
});
