/**
 * Payload specs are JSON Schema (draft 2020-12 keywords as ajv supports them, with formats).
 * ajv compiles each spec once per (id, version); compiled validators are cached.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { ValidationError, type ValidationIssue } from './errors.js';

// ajv-formats is CommonJS with `exports.default`; NodeNext sees the namespace.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv) => Ajv;

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
  });
  addFormats(ajv);
  return ajv;
}

const ajv = newAjv();
const cache = new Map<string, ValidateFunction>();

/** Throws a ValidationError at `path` unless `schema` is a valid JSON Schema. */
export function assertValidJsonSchema(schema: unknown, path: (string | number)[] = ['jsonSchema']): void {
  const probe = newAjv();
  try {
    probe.compile(schema as object);
  } catch (error) {
    throw ValidationError.at(path, `is not a valid JSON Schema: ${(error as Error).message}`);
  }
}

function issuesOf(errors: ErrorObject[] | null | undefined, prefix: (string | number)[]): ValidationIssue[] {
  return (errors ?? []).map((e) => {
    const segments = e.instancePath
      .split('/')
      .slice(1)
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
      .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
    const missing = e.keyword === 'required' ? [(e.params as { missingProperty: string }).missingProperty] : [];
    const message = e.keyword === 'required' ? 'is required' : (e.message ?? 'is invalid');
    return { path: [...prefix, ...segments, ...missing], message };
  });
}

/** Validates `input` against a payload spec; throws a ValidationError whose paths start at `prefix`. */
export function validateAgainstSpec(
  spec: { id: string; version: number; json_schema: unknown },
  input: unknown,
  prefix: (string | number)[] = ['input'],
): void {
  const cacheKey = `${spec.id}@${spec.version}`;
  let validate = cache.get(cacheKey);
  if (!validate) {
    validate = ajv.compile(spec.json_schema as object);
    cache.set(cacheKey, validate);
  }
  if (!validate(input)) throw new ValidationError(issuesOf(validate.errors, prefix));
}
