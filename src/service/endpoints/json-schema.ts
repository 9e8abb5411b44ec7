/**
 * Payload specs are JSON Schema draft-07 (ajv's default `Ajv` class, with ajv-formats): a
 * 2020-12 `$schema` or keyword (`prefixItems`) is refused as not a valid schema.
 * ajv compiles each spec once per (id, version); compiled validators are cached.
 *
 * Each compile gets an ajv instance of its own. One shared instance registers every schema's
 * `$id`, so a second spec with the same `$id` (another workspace's, or the next version of the
 * same spec) failed to compile, and a spec could `$ref` a schema of another workspace by its id.
 * An instance costs about 5 ms, once per spec version.
 */
import { Ajv, type CodeOptions, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { RE2JS } from 're2js';
import { canonicalJson } from '../kernel/canonical-json.js';
import { ValidationError, type ValidationIssue } from '../kernel/errors.js';

type RegExpEngine = NonNullable<CodeOptions['regExp']>;
type RegExpLike = ReturnType<RegExpEngine>;

// ajv-formats is CommonJS with `exports.default`; NodeNext sees the namespace.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv) => Ajv;

/**
 * `pattern` and `patternProperties` run on RE2 (re2js, pure JavaScript), in time linear in the
 * input. On the built-in backtracking engine one spec with `"pattern": "^(a+)+$"` and a job input
 * of 40 "a"s and a "!" blocked the event loop, every workspace's requests with it, for hours.
 * RE2 has no lookaround or backreferences: a spec using them is refused when it is created, with
 * the pattern named.
 */
const linearRegExp: RegExpEngine = Object.assign(compileLinear, { code: 'linearRegExp' });

function compileLinear(pattern: string): RegExpLike {
  let re: RE2JS;
  try {
    re = RE2JS.compile(RE2JS.translateRegExp(pattern));
  } catch (error) {
    throw new Error(
      `pattern "${pattern}" is not supported (patterns run on a linear-time engine: no lookaround, no backreferences): ${(error as Error).message}`,
    );
  }
  // ajv keys compiled patterns by toString(): it must differ between patterns.
  return { test: (s: string) => re.test(s), toString: () => pattern } as RegExpLike;
}

/**
 * ajv's own `uniqueItems` compares every pair of items unless the schema pins them to scalar
 * types: 30,000 small objects (350 KB) blocked the event loop for 11 s, a 1 MB request for a
 * minute and a half. This one keys each item by its canonical JSON, linear in the input's size.
 */
function addLinearUniqueItems(ajv: Ajv): void {
  ajv.removeKeyword('uniqueItems');
  ajv.addKeyword({
    keyword: 'uniqueItems',
    type: 'array',
    schemaType: 'boolean',
    errors: true,
    validate: function uniqueItems(unique: boolean, data: unknown[]): boolean {
      const validate = uniqueItems as unknown as { errors: Partial<ErrorObject>[] | null };
      if (!unique) return true;
      const seen = new Map<string, number>();
      for (const [i, item] of data.entries()) {
        const key = canonicalJson(item);
        const j = seen.get(key);
        if (j !== undefined) {
          validate.errors = [
            { keyword: 'uniqueItems', params: { i, j }, message: `must NOT have duplicate items (items ## ${j} and ${i} are identical)` },
          ];
          return false;
        }
        seen.set(key, i);
      }
      return true;
    },
  });
}

function newAjv(): Ajv {
  // Strict about the schema's own keywords (a typo such as "requird" is refused), lenient about
  // ordinary patterns that ajv's strictest checks flag (a required property not listed under
  // properties, union types).
  const ajv = new Ajv({
    allErrors: true,
    strict: true,
    strictRequired: false,
    strictTypes: false,
    strictTuples: false,
    allowUnionTypes: true,
    validateSchema: true,
    code: { regExp: linearRegExp },
  });
  addFormats(ajv);
  addLinearUniqueItems(ajv);
  return ajv;
}

/** Latest compiled version per spec id: an older version is dropped when a newer one is compiled. */
const cache = new Map<string, { version: number; validate: ValidateFunction }>();

const LOOP_MESSAGE = 'refers to itself without end: a $ref cycle that never reaches into the input';

/**
 * Runs a compiled validator. A `$ref` cycle that never descends into the instance (`{"$ref": "#"}`)
 * compiles but recurses until the stack overflows; that is reported as `loop`, never thrown as a
 * RangeError. Input is at most MAX_JSON_DEPTH deep, so a schema that recurses through the input
 * stays far from the stack's limit.
 */
function run(validate: ValidateFunction, input: unknown): 'valid' | 'invalid' | 'loop' {
  try {
    return validate(input) ? 'valid' : 'invalid';
  } catch (error) {
    if (error instanceof RangeError) return 'loop';
    throw error;
  }
}

// One value of each JSON type: a cycle that loops whatever the input is shows on one of them.
const PROBES: unknown[] = [null, true, 0, '', [], {}];

/** Throws a ValidationError at `path` unless `schema` is a valid JSON Schema. */
export function assertValidJsonSchema(schema: unknown, path: (string | number)[] = ['jsonSchema']): void {
  let validate: ValidateFunction;
  try {
    validate = newAjv().compile(schema as object);
  } catch (error) {
    // A `$ref` to itself with nothing between (`$defs: { a: { $ref: '#/$defs/a' } }`) overflows
    // ajv's compiler, whose message ("Maximum call stack size exceeded") says nothing of the schema.
    if (error instanceof RangeError) throw ValidationError.at(path, LOOP_MESSAGE);
    throw ValidationError.at(path, `is not a valid JSON Schema: ${(error as Error).message}`);
  }
  if (PROBES.some((probe) => run(validate, probe) === 'loop')) throw ValidationError.at(path, LOOP_MESSAGE);
}

/**
 * Most issues one refusal lists. With allErrors, a 1 MB input of 300,000 wrong items gave
 * 300,000 issues and a 9 MB message, twenty times the request, sent back and logged.
 */
const MAX_ISSUES = 100;

function issuesOf(errors: ErrorObject[] | null | undefined, prefix: (string | number)[]): ValidationIssue[] {
  const all = errors ?? [];
  const issues = all.slice(0, MAX_ISSUES).map((e) => {
    const segments = e.instancePath
      .split('/')
      .slice(1)
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
      .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
    const missing = e.keyword === 'required' ? [(e.params as { missingProperty: string }).missingProperty] : [];
    const message = e.keyword === 'required' ? 'is required' : (e.message ?? 'is invalid');
    return { path: [...prefix, ...segments, ...missing], message };
  });
  if (all.length > MAX_ISSUES) issues.push({ path: prefix, message: `and ${all.length - MAX_ISSUES} more issue(s) not listed` });
  return issues;
}

/** Validates `input` against a payload spec; throws a ValidationError whose paths start at `prefix`. */
export function validateAgainstSpec(
  spec: { id: string; version: number; json_schema: unknown },
  input: unknown,
  prefix: (string | number)[] = ['input'],
): void {
  const cached = cache.get(spec.id);
  let validate = cached?.version === spec.version ? cached.validate : undefined;
  if (!validate) {
    try {
      validate = newAjv().compile(spec.json_schema as object);
    } catch (error) {
      // Stored before a rule that now refuses it (a lookaround pattern): no input can be checked.
      throw ValidationError.at(prefix, `cannot be checked: the payload spec is no longer accepted: ${(error as Error).message}`);
    }
    cache.set(spec.id, { version: spec.version, validate });
  }
  // A spec that loops on some input can have been stored before creation probed for loops, or
  // loop only on input shaped like this one: the input cannot be checked, so it is refused.
  const outcome = run(validate, input);
  if (outcome === 'loop') throw ValidationError.at(prefix, `cannot be checked: the payload spec ${LOOP_MESSAGE}`);
  if (outcome === 'invalid') throw new ValidationError(issuesOf(validate.errors, prefix));
}
