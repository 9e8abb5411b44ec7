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

  it('is empty for blank input', () => {
    expect(parseSearch('   ', keys)).toEqual({ terms: {}, text: '' });
  });
});
