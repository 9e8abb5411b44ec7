/**
 * `{{config.key}}` and `{{input.path.to.value}}` placeholders in endpoint urls, headers and
 * string values of the body. An unknown placeholder is an error, not an empty string.
 */
export class TemplateError extends Error {
  override name = 'TemplateError';
}

export interface TemplateScope {
  /** `refused`: why this rendering may not use the secret (an endpoint or a job's input naming another key's secret). */
  config: Record<string, { value: string; secret: boolean; refused?: string }>;
  input: unknown;
}

const PLACEHOLDER = /\{\{\s*(config|input)\.([A-Za-z0-9_.-]+)\s*\}\}/g;

function lookupInput(input: unknown, path: string): string {
  let v: unknown = input;
  for (const part of path.split('.')) {
    // Own keys only: `in` would also find inherited ones (constructor, __proto__) and render them.
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, part))
      throw new TemplateError(`{{input.${path}}}: no such value in the job input`);
    v = (v as Record<string, unknown>)[part];
  }
  return typeof v === 'string' ? v : JSON.stringify(v);
}

export function render(template: string, scope: TemplateScope, encode: (s: string, from: 'config' | 'input') => string = (s) => s): string {
  return template.replace(PLACEHOLDER, (_m, source: 'config' | 'input', key: string) => {
    if (source === 'config') {
      // Own keys only, as for the input: `constructor` or `toString` would render as "undefined".
      const entry = Object.hasOwn(scope.config, key) ? scope.config[key] : undefined;
      if (!entry) throw new TemplateError(`{{config.${key}}}: the endpoint's config has no key "${key}"`);
      if (entry.refused) throw new TemplateError(`{{config.${key}}}: ${entry.refused}`);
      return encode(entry.value, 'config');
    }
    return encode(lookupInput(scope.input, key), 'input');
  });
}

/**
 * `text` that renders as itself but for a zero-width space (U+200B) between the braces of each
 * placeholder it holds. For text jobgate puts into a job's input on a user's behalf (an alert's
 * job name or error text, sent to a webhook endpoint): the body of an HTTP job is rendered with
 * its endpoint's config, so a job named `{{config.token}}` would otherwise have that endpoint's
 * secret written into the alert, or, naming no key, make its delivery fail. The template language
 * has no escape, and a placeholder that looks the same when shown is the least surprising change.
 */
export function inert(text: string): string {
  return text.replace(PLACEHOLDER, (m) => `{\u200b${m.slice(1)}`);
}

/** The config keys the strings of a JSON value name (`{{config.key}}`). */
export function configKeysIn(value: unknown, keys = new Set<string>()): Set<string> {
  if (typeof value === 'string') {
    for (const m of value.matchAll(PLACEHOLDER)) {
      if (m[1] === 'config') keys.add(m[2]!);
    }
  } else if (Array.isArray(value)) {
    for (const v of value) configKeysIn(v, keys);
  } else if (value && typeof value === 'object') {
    for (const v of Object.values(value)) configKeysIn(v, keys);
  }
  return keys;
}

/** Renders placeholders in every string of a JSON value. */
export function renderDeep(value: unknown, scope: TemplateScope): unknown {
  if (typeof value === 'string') return render(value, scope);
  if (Array.isArray(value)) return value.map((v) => renderDeep(v, scope));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderDeep(v, scope)]));
  }
  return value;
}
