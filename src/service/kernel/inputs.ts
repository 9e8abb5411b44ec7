/**
 * The shapes the service accepts, as zod schemas. These are the one definition of input
 * rules: the service parses every call with them (library and CLI callers included), and the
 * GraphQL layer attaches the same schemas to its arguments through the zod plugin so a
 * client gets the error before the resolver runs, with the path of the bad field.
 *
 * Optional fields are `nullish`: GraphQL sends `null` for an explicit null. Where null means
 * something different from "absent" (clearing a reference on update), the service says so.
 */
import { HANDLER_NAME, HANDLER_NAME_RULE } from '../../db/handler-name.js';
import { z } from 'zod';
import { isInstantProblem, parseInstant } from './instant.js';

export const ENDPOINT_NAME = /^[a-z0-9]+(-[a-z0-9]+)*(\.[a-z0-9]+(-[a-z0-9]+)*)*$/;
const CONFIG_KEY = /^[A-Za-z_][A-Za-z0-9_.-]{0,127}$/;
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
// A field value (RFC 9110 §5.5): no line breaks or other control characters, nothing past U+00FF.
// Refused when the endpoint is registered, so that no delivery fails on the endpoint's own value.
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const HEADER_VALUE_MESSAGE = 'is not a valid header value: no line breaks or control characters, nothing beyond U+00FF';

// Postgres text and jsonb refuse U+0000, and a UTF-16 surrogate without its pair is no
// character at all (jsonb refuses its escape; text would silently store U+FFFD, so two different
// keys could become one). Checked here, such input is VALIDATION_FAILED naming the field instead
// of a database error masked as internal.
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSTORABLE_MESSAGE = 'must not contain NUL (U+0000) or an unpaired UTF-16 surrogate';

/** Whether Postgres can store the string as it is. */
export function isStorableText(value: string): boolean {
  return !UNSTORABLE.test(value);
}

/** The string with what Postgres cannot store (NUL, unpaired surrogates) replaced by U+FFFD: for text jobgate records, not input. */
export function storableText(value: string): string {
  return value.replace(new RegExp(UNSTORABLE.source, 'g'), '\ufffd');
}

/** A string Postgres can store. Every free-text input field is one. */
export const text = () => z.string().refine(isStorableText, UNSTORABLE_MESSAGE);

// The explicit bidirectional embeddings, overrides and isolates (LRE, RLE, PDF, LRO, RLO, LRI,
// RLI, FSI, PDI): in a name they reorder how it, and text shown after it, reads ("invoice", U+202E,
// "fdp.exe" shows as "invoiceexe.pdf"). Right-to-left text needs none of them; the marks (LRM, RLM, ALM)
// stay allowed.
const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/;

/**
 * A name people read (a job's, a batch's, a workspace's, a key's, an alert rule's): 1 to 200
 * storable characters, none of them a bidirectional control.
 */
export const displayName = () =>
  text()
    .min(1)
    .max(200)
    .refine((v) => !BIDI_CONTROLS.test(v), 'must not contain bidirectional controls (U+202A to U+202E, U+2066 to U+2069)');

/**
 * Deepest nesting of arrays and objects a JSON input may have. Far beyond any real payload, and
 * well inside what the recursive code after it (JSON.stringify, key-order comparison, audit
 * redaction) can walk without overflowing the stack.
 */
export const MAX_JSON_DEPTH = 100;

type JsonProblem = { path: (string | number)[]; message: string };

/** The first reason `value` cannot be stored as jsonb unchanged; paths are relative to it. */
function jsonProblem(value: unknown, path: (string | number)[], ancestors: Set<object>): JsonProblem | undefined {
  switch (typeof value) {
    case 'string':
      return isStorableText(value) ? undefined : { path, message: UNSTORABLE_MESSAGE };
    case 'number':
      // JSON.stringify would write Infinity and NaN as null.
      return Number.isFinite(value) ? undefined : { path, message: 'must be a finite number' };
    case 'boolean':
    case 'undefined':
      return undefined;
    case 'object':
      break;
    default:
      return { path, message: `is not a JSON value (a ${typeof value})` };
  }
  if (value === null || value instanceof Date) return undefined;
  if (ancestors.has(value)) return { path: [], message: 'contains itself; JSON cannot hold a cycle' };
  if (path.length >= MAX_JSON_DEPTH) return { path: [], message: `is nested more than ${MAX_JSON_DEPTH} levels deep` };
  ancestors.add(value);
  try {
    const entries: [string | number, unknown][] = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    for (const [key, child] of entries) {
      if (typeof key === 'string' && !isStorableText(key)) return { path: [...path, key], message: `has a key that ${UNSTORABLE_MESSAGE}` };
      const problem = jsonProblem(child, [...path, key], ancestors);
      if (problem) return problem;
    }
  } finally {
    ancestors.delete(value);
  }
  return undefined;
}

function checkJson(value: unknown, ctx: z.RefinementCtx): void {
  const problem = jsonProblem(value, [], new Set());
  if (problem) ctx.addIssue({ code: 'custom', path: problem.path, message: problem.message });
}

/** Any JSON value that Postgres can store as jsonb. */
export const jsonValue = () => z.unknown().superRefine(checkJson);

export const idSchema = z.string().min(1).max(100);

/** The earliest instant a Postgres timestamptz holds (4714-11-24 BC); the latest is past JavaScript's. */
const EARLIEST_TIMESTAMP = Date.UTC(-4713, 10, 24);

/**
 * Accepts a Date or an RFC 3339 string with its offset (library callers; instant.ts), rejects
 * invalid dates and dates Postgres cannot store.
 */
export const dateSchema = z.preprocess(
  (v, ctx) => {
    if (typeof v !== 'string') return v;
    const instant = parseInstant(v);
    if (!isInstantProblem(instant)) return instant;
    ctx.addIssue({ code: 'custom', message: `is not an RFC 3339 date-time: it ${instant.problem}` });
    return z.NEVER;
  },
  z.date({ error: 'must be a valid date-time' }).refine((d) => d.getTime() >= EARLIEST_TIMESTAMP, 'must not be earlier than 4714-11-24 BC'),
);

export const pageSchema = z.object({
  first: z.number().int().min(1).max(100).nullish(),
  after: text().max(200).nullish(),
});
export type PageInput = z.input<typeof pageSchema>;

/**
 * Headers that frame the message or the connection (RFC 9110) and that the
 * HTTP client refuses or cannot honour when a request names them: every attempt failed ("invalid
 * transfer-encoding header", "expect header not supported", a body of another length). Connection
 * (`close`, say), TE and Trailer it takes, so they are left to the endpoint.
 */
const FRAMING_HEADERS = new Set(['content-length', 'expect', 'keep-alive', 'transfer-encoding', 'upgrade']);

const headersSchema = z
  .record(
    text()
      .regex(HEADER_NAME, 'is not a valid header name')
      .max(256)
      .refine(
        (name) => !FRAMING_HEADERS.has(name.toLowerCase()),
        'is set by the HTTP client itself (it frames the message or the connection)',
      )
      // The outbound policy checks the url's address; a Host of another name would reach another
      // site behind that address (a shared proxy's or load balancer's virtual hosts).
      .refine((name) => name.toLowerCase() !== 'host', "is taken from the url's host"),
    text().max(8192).regex(HEADER_VALUE, HEADER_VALUE_MESSAGE),
  )
  .refine((h) => Object.keys(h).length <= 50, 'at most 50 headers')
  .superRefine((h, ctx) => {
    // Names are case-insensitive: delivery lowercases them, and one of two would silently win.
    const seen = new Set<string>();
    for (const name of Object.keys(h)) {
      const lower = name.toLowerCase();
      if (seen.has(lower))
        ctx.addIssue({ code: 'custom', path: [name], message: 'names a header given already (names are case-insensitive)' });
      seen.add(lower);
    }
  });

const httpUrl = text()
  .max(2048)
  .refine((v) => {
    try {
      const u = new URL(v.replace(/\{\{[^}]*\}\}/g, 'x'));
      return u.protocol === 'http:' || u.protocol === 'https:';
    } catch {
      return false;
    }
  }, 'must be an http:// or https:// URL');

/**
 * An endpoint's backoff when it sets none (the columns' defaults in migration 000001 are the
 * same, and the service writes these rather than leave it to them): a bound given alone is
 * checked against the other's default here, where a failure names the field, instead of by the
 * table's check constraint, which answers an internal error and logs the row, secrets and all.
 */
export const DEFAULT_BACKOFF_BASE_MS = 1000;
export const DEFAULT_BACKOFF_MAX_MS = 300_000;

const rateLimitSchema = z.object({
  count: z.number().int().min(1).max(1_000_000),
  periodMs: z.number().int().min(1000).max(86_400_000),
  burst: z.number().int().min(1).max(1_000_000).nullish(),
});

const retryFields = {
  maxAttempts: z.number().int().min(1).max(100).nullish(),
  backoffBaseMs: z.number().int().min(1).max(86_400_000).nullish(),
  backoffMaxMs: z.number().int().min(1).max(86_400_000).nullish(),
  jitter: z.boolean().nullish(),
  concurrencyLimit: z.number().int().min(1).max(10_000).nullish(),
  defaultPriority: z.number().int().min(-100).max(100).nullish(),
  keyConcurrencyLimit: z.number().int().min(1).max(10_000).nullish(),
  rateLimit: rateLimitSchema.nullish(),
  keyRateLimit: rateLimitSchema.nullish(),
};

const httpFields = {
  url: httpUrl.nullish(),
  method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).nullish(),
  headers: headersSchema.nullish(),
  timeoutMs: z.number().int().min(1).max(3_600_000).nullish(),
  signingSecret: text().min(16, 'must be at least 16 characters').max(512).nullish(),
};

/**
 * A HANDLER endpoint's handler: named as a worker can register one (src/db/handler-name.ts). Any
 * other name was taken, and its executions waited for a handler that no worker could have.
 */
const handlerName = () => text().regex(HANDLER_NAME, `${HANDLER_NAME_RULE} (as a handler registered in a worker is named)`);

export const registerEndpointSchema = z
  .object({
    name: text().max(200).regex(ENDPOINT_NAME, 'must be dotted lowercase words, e.g. "billing.send-invoice"'),
    description: text().max(2000).nullish(),
    kind: z.enum(['HTTP', 'HANDLER']),
    handlerName: handlerName().nullish(),
    payloadSpecId: idSchema.nullish(),
    configId: idSchema.nullish(),
    ...httpFields,
    ...retryFields,
  })
  .superRefine((v, ctx) => {
    if (v.kind === 'HTTP') {
      if (!v.url) ctx.addIssue({ code: 'custom', path: ['url'], message: 'is required for an HTTP endpoint' });
      if (v.handlerName) ctx.addIssue({ code: 'custom', path: ['handlerName'], message: 'is only for HANDLER endpoints' });
    } else {
      if (!v.handlerName) ctx.addIssue({ code: 'custom', path: ['handlerName'], message: 'is required for a HANDLER endpoint' });
      for (const f of ['url', 'method', 'headers', 'signingSecret'] as const) {
        if (v[f] != null) ctx.addIssue({ code: 'custom', path: [f], message: 'is only for HTTP endpoints' });
      }
    }
    const base = v.backoffBaseMs ?? DEFAULT_BACKOFF_BASE_MS;
    const max = v.backoffMaxMs ?? DEFAULT_BACKOFF_MAX_MS;
    if (max < base) {
      // The field that was given is the one to change: the other is its default.
      if (v.backoffMaxMs == null) {
        ctx.addIssue({
          code: 'custom',
          path: ['backoffBaseMs'],
          message: `must be at most backoffMaxMs, which is ${DEFAULT_BACKOFF_MAX_MS} when not given`,
        });
      } else {
        const of = v.backoffBaseMs == null ? `the default backoffBaseMs (${DEFAULT_BACKOFF_BASE_MS})` : 'backoffBaseMs';
        ctx.addIssue({ code: 'custom', path: ['backoffMaxMs'], message: `must be at least ${of}` });
      }
    }
  });
export type RegisterEndpointInput = z.input<typeof registerEndpointSchema>;

export const updateEndpointSchema = z.object({
  id: idSchema,
  description: text().max(2000).nullish(),
  handlerName: handlerName().nullish(),
  /** null clears the reference; absent leaves it. */
  payloadSpecId: idSchema.nullish(),
  /** null clears the reference; absent leaves it. */
  configId: idSchema.nullish(),
  ...httpFields,
  ...retryFields,
});
export type UpdateEndpointInput = z.input<typeof updateEndpointSchema>;

export const endpointRefSchema = z
  .object({ id: idSchema.nullish(), name: text().max(200).nullish() })
  .refine((v) => (v.id == null) !== (v.name == null), 'give exactly one of id or name');
export type EndpointRef = z.input<typeof endpointRefSchema>;

/** A JSON Schema document: an object or a boolean. Whether it is a *valid* schema is checked by the service. */
export const jsonSchemaDocument = z
  .union([z.record(z.string(), z.unknown()), z.boolean()], { error: 'must be a JSON Schema (an object or a boolean)' })
  .superRefine(checkJson);

export const createPayloadSpecSchema = z.object({
  name: text().min(1).max(200).regex(ENDPOINT_NAME, 'must be dotted lowercase words'),
  description: text().max(2000).nullish(),
  jsonSchema: jsonSchemaDocument,
});
export type CreatePayloadSpecInput = z.input<typeof createPayloadSpecSchema>;

export const updatePayloadSpecSchema = z.object({
  id: idSchema,
  description: text().max(2000).nullish(),
  jsonSchema: jsonSchemaDocument.nullish(),
});
export type UpdatePayloadSpecInput = z.input<typeof updatePayloadSpecSchema>;

/** Shortest secret config value: redaction (src/service/engine/delivery/redaction.ts) leaves shorter ones in clear. */
export const MIN_SECRET_LENGTH = 4;

export const setConfigSchema = z.object({
  name: text().min(1).max(200).regex(ENDPOINT_NAME, 'must be dotted lowercase words'),
  entries: z
    .array(
      z.object({
        key: text().regex(CONFIG_KEY, 'must start with a letter or _ and hold only letters, digits, _ . -'),
        value: text().max(65_536),
        secret: z.boolean().nullish(),
      }),
    )
    .max(200)
    .superRefine((entries, ctx) => {
      const seen = new Set<string>();
      entries.forEach((e, i) => {
        if (seen.has(e.key)) ctx.addIssue({ code: 'custom', path: [i, 'key'], message: `duplicate key "${e.key}"` });
        seen.add(e.key);
        // Redaction leaves values this short alone (they would blank ordinary text), so a secret
        // this short could show in a recorded error or response excerpt.
        if (e.secret && e.value.length < MIN_SECRET_LENGTH) {
          ctx.addIssue({
            code: 'custom',
            path: [i, 'value'],
            message: `a secret value must be at least ${MIN_SECRET_LENGTH} characters, or it cannot be kept out of errors and excerpts`,
          });
        }
      });
    }),
});
export type SetConfigInput = z.input<typeof setConfigSchema>;

const timezone = z
  .string()
  .min(1)
  .max(100)
  .refine((tz) => {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: tz });
      return true;
    } catch {
      return false;
    }
  }, 'is not a known IANA time zone (e.g. "Europe/Paris", "UTC")');

export const cronScheduleSchema = z.object({
  expression: text().min(1).max(200),
  timezone: timezone.nullish(),
  startsAt: dateSchema.nullish(),
  endsAt: dateSchema.nullish(),
  misfirePolicy: z.enum(['FIRE_LATEST', 'SKIP', 'FIRE_ALL']).nullish(),
  overlapPolicy: z.enum(['SKIP', 'QUEUE', 'ALLOW']).nullish(),
});

const idempotencyKey = text().min(1, 'must not be empty; omit it for a job without a key').max(200);

/** The most prerequisites one job may name. */
export const MAX_PREREQUISITES = 100;

export const createJobSchema = z
  .object({
    endpointId: idSchema.nullish(),
    endpointName: text().max(200).nullish(),
    name: displayName().nullish(),
    kind: z.enum(['IMMEDIATE', 'DELAYED', 'CRON']),
    input: jsonValue().optional(),
    maxAttempts: z.number().int().min(1).max(100).nullish(),
    idempotencyKey: idempotencyKey.nullish(),
    lockKey: text().min(1, 'must not be empty; omit it for no lock').max(200).nullish(),
    whenLocked: z.enum(['REFUSE', 'THROTTLE', 'DEBOUNCE']).nullish(),
    priority: z.number().int().min(-100).max(100).nullish(),
    concurrencyKey: text().min(1, 'must not be empty; omit it for no key').max(200).nullish(),
    runAt: dateSchema.nullish(),
    cron: cronScheduleSchema.nullish(),
    dependsOn: z.array(idSchema).min(1, 'must name at least one job; omit it for none').max(MAX_PREREQUISITES).nullish(),
    onPrerequisiteFailure: z.enum(['CANCEL', 'RUN']).nullish(),
    batchId: idSchema.nullish(),
    parentExecutionId: idSchema.nullish(),
  })
  .superRefine((v, ctx) => {
    if (v.dependsOn != null && v.kind === 'CRON') {
      ctx.addIssue({
        code: 'custom',
        path: ['dependsOn'],
        message: 'is for IMMEDIATE and DELAYED jobs: a CRON job has no one start to hold back',
      });
    }
    if (v.dependsOn != null && new Set(v.dependsOn).size !== v.dependsOn.length) {
      ctx.addIssue({ code: 'custom', path: ['dependsOn'], message: 'names a job twice' });
    }
    if (v.batchId != null && v.kind === 'CRON') {
      ctx.addIssue({ code: 'custom', path: ['batchId'], message: 'is for IMMEDIATE and DELAYED jobs: a CRON job never ends' });
    }
    if (v.batchId != null && (v.whenLocked === 'THROTTLE' || v.whenLocked === 'DEBOUNCE')) {
      ctx.addIssue({
        code: 'custom',
        path: ['whenLocked'],
        message: `${v.whenLocked} would answer with another job: not for a batch member`,
      });
    }
    if (v.parentExecutionId != null && v.kind === 'CRON') {
      ctx.addIssue({ code: 'custom', path: ['parentExecutionId'], message: 'is for IMMEDIATE and DELAYED jobs: a child runs once' });
    }
    if (v.onPrerequisiteFailure != null && v.dependsOn == null) {
      ctx.addIssue({ code: 'custom', path: ['onPrerequisiteFailure'], message: 'is only for a job with dependsOn' });
    }
    if (v.whenLocked != null && v.whenLocked !== 'REFUSE' && v.lockKey == null) {
      ctx.addIssue({
        code: 'custom',
        path: ['whenLocked'],
        message: `${v.whenLocked} needs a lockKey: it acts on the job holding that key`,
      });
    }
    if (v.whenLocked != null && v.whenLocked !== 'REFUSE' && v.kind === 'CRON') {
      ctx.addIssue({ code: 'custom', path: ['whenLocked'], message: `${v.whenLocked} is for IMMEDIATE and DELAYED jobs` });
    }
    if ((v.endpointId == null) === (v.endpointName == null)) {
      ctx.addIssue({ code: 'custom', path: ['endpointId'], message: 'give exactly one of endpointId or endpointName' });
    }
    if (v.kind === 'DELAYED' && v.runAt == null) {
      ctx.addIssue({ code: 'custom', path: ['runAt'], message: 'is required for a DELAYED job' });
    }
    if (v.kind !== 'DELAYED' && v.runAt != null) {
      ctx.addIssue({ code: 'custom', path: ['runAt'], message: 'is only for DELAYED jobs' });
    }
    if (v.kind === 'CRON' && v.cron == null) {
      ctx.addIssue({ code: 'custom', path: ['cron'], message: 'is required for a CRON job' });
    }
    if (v.kind !== 'CRON' && v.cron != null) {
      ctx.addIssue({ code: 'custom', path: ['cron'], message: 'is only for CRON jobs' });
    }
    if (v.cron?.startsAt && v.cron.endsAt && v.cron.endsAt <= v.cron.startsAt) {
      ctx.addIssue({ code: 'custom', path: ['cron', 'endsAt'], message: 'must be after startsAt' });
    }
  });
export type CreateJobInput = z.input<typeof createJobSchema>;

/** The most jobs one createBatch creates; more are added with createJob's batchId while it is open. */
export const MAX_BATCH_JOBS = 1000;

export const createBatchSchema = z.object({
  key: text().min(1, 'must not be empty; omit it for no key').max(200).nullish(),
  name: displayName().nullish(),
  // Each member and the onComplete job are parsed by createJobSchema where they are created (their paths under jobs.<i> and onComplete).
  jobs: z.array(z.record(z.string(), z.unknown())).max(MAX_BATCH_JOBS).nullish(),
  onComplete: z.record(z.string(), z.unknown()).nullish(),
  open: z.boolean().nullish(),
});
export type CreateBatchInput = {
  key?: string | null;
  name?: string | null;
  jobs?: readonly CreateJobInput[] | null;
  onComplete?: CreateJobInput | null;
  open?: boolean | null;
};

export const updateJobSchema = z.object({
  id: idSchema,
  name: displayName().nullish(),
  input: jsonValue().optional(),
  maxAttempts: z.number().int().min(1).max(100).nullish(),
  runAt: dateSchema.nullish(),
  cron: cronScheduleSchema.partial().nullish(),
});
export type UpdateJobInput = z.input<typeof updateJobSchema>;

const listOrder = z.enum(['NEWEST_FIRST', 'OLDEST_FIRST']);

export const jobFilterSchema = z.object({
  status: z.enum(['ACTIVE', 'PAUSED', 'RETIRED']).nullish(),
  kind: z.enum(['IMMEDIATE', 'DELAYED', 'CRON']).nullish(),
  endpointId: idSchema.nullish(),
  includeInternal: z.boolean().nullish(),
  search: text().min(1).max(200).nullish(),
  order: listOrder.nullish(),
});
export type JobFilter = z.input<typeof jobFilterSchema>;

const executionStatus = z.enum(['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED']);

export const executionFilterSchema = z
  .object({
    ids: z.array(idSchema).min(1).max(1000).nullish(),
    jobId: idSchema.nullish(),
    endpointId: idSchema.nullish(),
    endpointType: z.enum(['USER', 'INTERNAL']).nullish(),
    status: executionStatus.nullish(),
    statuses: z.array(executionStatus).max(5).nullish(),
    trigger: z.enum(['SCHEDULE', 'MANUAL']).nullish(),
    createdAfter: dateSchema.nullish(),
    createdBefore: dateSchema.nullish(),
    search: text().min(1).max(200).nullish(),
    // Under three characters a trigram index has nothing to look up: every error would be read.
    errorContains: text().min(3).max(200).nullish(),
    order: listOrder.nullish(),
  })
  .refine((f) => !(f.createdAfter && f.createdBefore) || f.createdAfter < f.createdBefore, {
    path: ['createdBefore'],
    message: 'must be after createdAfter',
  });
export type ExecutionFilter = z.input<typeof executionFilterSchema>;

/** The first instant a schedule is walked from: before it, the walk's calendar arithmetic reads years 0-99 as 1900-1999. */
const CRON_EPOCH = Date.UTC(1970, 0, 1);

export const cronPreviewSchema = z.object({
  expression: text().min(1).max(200),
  timezone: timezone.nullish(),
  from: dateSchema.refine((d) => d.getTime() >= CRON_EPOCH, 'must not be earlier than 1970-01-01T00:00:00Z').nullish(),
  count: z.number().int().min(1).max(100).nullish(),
});
export type CronPreviewInput = z.input<typeof cronPreviewSchema>;

export const triggerJobSchema = z.object({
  id: idSchema,
  /** Run even if the job is paused or already has a pending or running execution. */
  force: z.boolean().nullish(),
  /** Makes the trigger idempotent: the same request id returns the same execution. */
  requestId: text().min(1, 'must not be empty; omit it for none').max(200).nullish(),
});
export type TriggerJobInput = z.input<typeof triggerJobSchema>;
