/**
 * The small search syntax of a list's search box: `status:paused endpoint:billing kind:cron` and
 * free text, with double quotes around a value or words that hold spaces (`"nightly report"`).
 * Keys are matched in any case; a key the list does not know stays in the free text, so nothing
 * typed is silently dropped. Pure; unit-tested.
 */
export interface ParsedSearch {
  /** Known keys (lower case) to their values, the last one given winning. */
  terms: Record<string, string>;
  /** What is left, words joined by single spaces. */
  text: string;
}

const TOKEN = /(?:([A-Za-z]+):)?(?:"([^"]*)"?|(\S+))/g;

export function parseSearch(input: string, keys: readonly string[]): ParsedSearch {
  const terms: Record<string, string> = {};
  const free: string[] = [];
  for (const m of input.matchAll(TOKEN)) {
    const key = m[1]?.toLowerCase();
    const value = m[2] ?? m[3] ?? '';
    if (key && keys.includes(key) && value) terms[key] = value;
    else if (key) free.push(`${m[1]}:${value}`);
    else if (value) free.push(value);
  }
  return { terms, text: free.join(' ') };
}
