import { describe, expect, it } from 'vitest';
import { parseSearch } from '../src/lib/search-syntax.ts';

describe('the search syntax', () => {
  const keys = ['status', 'kind', 'endpoint'];

  it('takes key:value terms in any case and leaves the rest as free text', () => {
    expect(parseSearch('Status:paused nightly endpoint:billing.send', keys)).toEqual({
      terms: { status: 'paused', endpoint: 'billing.send' },
      text: 'nightly',
    });
  });

  it('reads quoted values and quoted free text with their spaces', () => {
    expect(parseSearch('kind:"CRON" "nightly report"', keys)).toEqual({ terms: { kind: 'CRON' }, text: 'nightly report' });
  });

  it('keeps an unknown key or an empty value in the free text rather than dropping it', () => {
    expect(parseSearch('error:timeout status: x', keys)).toEqual({ terms: {}, text: 'error:timeout status: x' });
  });

  it("reads the issue's example: an error text in quotes, with its spaces and colons, beside status and endpoint", () => {
    const withError = [...keys, 'error'];
    expect(parseSearch('status:failed endpoint:billing error:"timeout"', withError)).toEqual({
      terms: { status: 'failed', endpoint: 'billing', error: 'timeout' },
      text: '',
    });
    expect(parseSearch('Error:"ECONNRESET: socket hang up" nightly-report', withError)).toEqual({
      terms: { error: 'ECONNRESET: socket hang up' },
      text: 'nightly-report',
    });
  });

  it("takes a job's name as free text, quoted when it holds spaces, wherever it stands among the terms", () => {
    expect(parseSearch('status:failed "nightly report" kind:cron', keys)).toEqual({
      terms: { status: 'failed', kind: 'cron' },
      text: 'nightly report',
    });
  });

  it('reads an unclosed quote to the end of the input', () => {
    expect(parseSearch('endpoint:billing error:"read timed out', [...keys, 'error'])).toEqual({
      terms: { endpoint: 'billing', error: 'read timed out' },
      text: '',
    });
  });

  it('is empty for blank input', () => {
    expect(parseSearch('   ', keys)).toEqual({ terms: {}, text: '' });
  });
});
