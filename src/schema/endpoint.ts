import { registerEndpointSchema, updateEndpointSchema } from '../service/kernel/inputs.js';
import type { Endpoint } from '../service/kernel/models.js';
import type { TargetWarning } from '../service/endpoints/endpoints.js';
import { builder } from './builder.js';
import { ConfigRef, PayloadSpecRef } from './specs-and-configs.js';
import { connectionOf, DateTimeScalar, JSONScalar, nodeId, zodInput } from './common.js';

export const EndpointKindEnum = builder.enumType('EndpointKind', {
  description: 'How work is delivered to an endpoint.',
  values: {
    HTTP: { description: 'An HTTP request to a URL, signed per the Standard Webhooks scheme when a secret is set.' },
    HANDLER: { description: 'An in-process handler registered by name through the jobgate library.' },
  } as const,
});

export const EndpointTypeEnum = builder.enumType('EndpointType', {
  description: 'Who owns an endpoint.',
  values: {
    USER: { description: 'Created by a user of the API.' },
    INTERNAL: { description: 'Owned by jobgate itself; users cannot create jobs on it, change it or cancel its jobs.' },
  } as const,
});

export const HttpMethodEnum = builder.enumType('HttpMethod', {
  description: 'The HTTP method of an HTTP endpoint.',
  values: {
    GET: { description: 'GET, with no body.' },
    POST: { description: 'POST (the default).' },
    PUT: { description: 'PUT.' },
    PATCH: { description: 'PATCH.' },
    DELETE: { description: 'DELETE.' },
  } as const,
});

export const TargetWarningCodeEnum = builder.enumType('TargetWarningCode', {
  description: "Why deliveries to an endpoint's target will likely fail, as the outbound policy sees its host name now.",
  values: {
    TARGET_RESOLVES_TO_REFUSED_ADDRESS: {
      description:
        'Every address the host name resolves to is loopback, private, link-local or otherwise special-purpose and not in JOBGATE_OUTBOUND_ALLOW.',
    },
    TARGET_DOES_NOT_RESOLVE: { description: 'The host name does not resolve just now (or not within 2 seconds).' },
  } as const,
});

export const TargetWarningRef = builder.objectRef<TargetWarning>('TargetWarning').implement({
  description:
    "Advice about an endpoint's target: deliveries will likely fail. Each delivery checks the address it actually connects to, which decides.",
  fields: (t) => ({
    code: t.field({ type: TargetWarningCodeEnum, description: 'What is wrong, as a value to switch on.', resolve: (w) => w.code }),
    message: t.exposeString('message', { description: 'What is wrong, for people: the host, the addresses it resolves to, what to do.' }),
  }),
});

export const RateLimitRef = builder.objectRef<{ count: number; periodMs: number; burst: number }>('RateLimit').implement({
  description:
    "A rate limit (an endpoint's, or each concurrency key's), a token bucket of `burst` tokens refilled at `count` per `periodMs`: in any stretch of time T, at most burst + count × T / periodMs executions start (of the endpoint, or of one key).",
  fields: (t) => ({
    count: t.exposeInt('count', { description: 'Starts per period.' }),
    periodMs: t.exposeInt('periodMs', { description: 'The period in milliseconds.' }),
    burst: t.exposeInt('burst', { description: 'The most starts at once after a quiet spell.' }),
  }),
});

export const ConcurrencyKeyLoadRef = builder.objectRef<{ key: string; running: number; pending: number }>('ConcurrencyKeyLoad').implement({
  description: "One concurrency key's load on an endpoint, read at the moment of the query.",
  fields: (t) => ({
    key: t.exposeString('key', { description: "The concurrency key (a job's concurrencyKey)." }),
    running: t.exposeInt('running', { description: 'Its attempts in flight on the endpoint now.' }),
    pending: t.exposeInt('pending', { description: 'Its executions of the endpoint waiting to start (due or not).' }),
  }),
});

export const RetryAfterHoldRef = builder.objectRef<{ until: Date; statusCode: number }>('RetryAfterHold').implement({
  description:
    "A hold an endpoint's target asked for: it answered 429 or 503 with Retry-After, so no execution of the endpoint starts before `until`.",
  fields: (t) => ({
    until: t.field({
      type: DateTimeScalar,
      description: 'When the hold ends: the latest time any of its answers asked for.',
      resolve: (h) => h.until,
    }),
    statusCode: t.exposeInt('statusCode', { description: 'The status of the answer that asked for the longest wait (429 or 503).' }),
  }),
});

export const EndpointRef = builder.nodeRef<Endpoint>('Endpoint', { id: nodeId() }).implement({
  description: 'A named delivery target: an HTTP URL or an in-process handler, with its retry policy.',
  fields: (t) => ({
    name: t.exposeString('name', {
      description: 'Unique among live endpoints of the workspace; dotted lowercase, e.g. "billing.send-invoice".',
    }),
    description: t.exposeString('description', { nullable: true, description: 'What the endpoint does, for people.' }),
    kind: t.field({ type: EndpointKindEnum, description: 'HTTP or HANDLER.', resolve: (e) => e.kind }),
    type: t.field({ type: EndpointTypeEnum, description: 'USER or INTERNAL.', resolve: (e) => e.type }),
    url: t.exposeString('url', { nullable: true, description: 'HTTP only: the target URL; may contain `{{config.key}}` placeholders.' }),
    targetWarnings: t.field({
      type: [TargetWarningRef],
      description:
        'What the outbound policy would likely say of the target now, computed when asked (it resolves the host name, waiting at most 2 seconds): ' +
        'select it in registerEndpoint or updateEndpoint to learn at once that deliveries will fail. An url whose host is an IP literal the policy refuses ' +
        'is refused outright (VALIDATION_FAILED); a host name is only warned about, since DNS can change. Empty for HANDLER endpoints and templated hosts.',
      resolve: (e, _args, ctx) => ctx.service.endpointTargetWarnings(ctx.actor, e),
    }),
    method: t.field({ type: HttpMethodEnum, nullable: true, description: 'HTTP only: the method.', resolve: (e) => e.method }),
    headers: t.field({
      type: JSONScalar,
      description: 'HTTP only: extra request headers, an object of name to value; values may use placeholders.',
      resolve: (e) => e.headers,
    }),
    timeoutMs: t.exposeInt('timeoutMs', { nullable: true, description: 'Per-attempt timeout in milliseconds; null uses the default.' }),
    hasSigningSecret: t.exposeBoolean('hasSigningSecret', {
      description: 'Whether requests are signed. The secret itself is write-only and never returned.',
    }),
    handlerName: t.exposeString('handlerName', { nullable: true, description: 'HANDLER only: the registered handler name.' }),
    payloadSpec: t.field({
      type: PayloadSpecRef,
      nullable: true,
      description: 'The JSON Schema job input must satisfy, if any.',
      resolve: (e, _args, ctx) => (e.payloadSpecId ? ctx.service.payloadSpec(ctx.actor, e.payloadSpecId) : null),
    }),
    config: t.field({
      type: ConfigRef,
      nullable: true,
      description: 'The config used for `{{config.key}}` templating, if any.',
      resolve: (e, _args, ctx) => (e.configId ? ctx.service.config(ctx.actor, e.configId) : null),
    }),
    maxAttempts: t.exposeInt('maxAttempts', {
      nullable: true,
      description: 'Attempts per execution unless the job overrides it; null uses the installation default.',
    }),
    backoffBaseMs: t.exposeInt('backoffBaseMs', { description: 'First retry delay in milliseconds; doubles each attempt.' }),
    backoffMaxMs: t.exposeInt('backoffMaxMs', { description: 'Longest retry delay in milliseconds.' }),
    jitter: t.exposeBoolean('jitter', { description: 'Whether retry delays are randomised (full jitter).' }),
    archivedAt: t.field({
      type: DateTimeScalar,
      nullable: true,
      description: 'When the endpoint was archived; archived endpoints take no new jobs.',
      resolve: (e) => e.archivedAt,
    }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When the endpoint was registered.', resolve: (e) => e.createdAt }),
    updatedAt: t.field({ type: DateTimeScalar, description: 'When the endpoint last changed.', resolve: (e) => e.updatedAt }),
  }),
});

// The levers of flow control (docs/operating.md, "Flow control"), apart from what the endpoint is.
builder.objectFields(EndpointRef, (t) => ({
  concurrencyLimit: t.exposeInt('concurrencyLimit', {
    nullable: true,
    description: 'Most attempts in flight at once across all workers; null is unlimited.',
  }),
  keyConcurrencyLimit: t.exposeInt('keyConcurrencyLimit', {
    nullable: true,
    description:
      "Most attempts in flight at once per concurrency key (a job's concurrencyKey), across all workers; null is no per-key limit. With one, claims rotate between the keys with due work.",
  }),
  defaultPriority: t.exposeInt('defaultPriority', {
    description: 'The priority of jobs created for this endpoint without one of their own, -100 to 100 (higher first). Default 0.',
  }),
  rateLimit: t.field({
    type: RateLimitRef,
    nullable: true,
    description: 'At most `count` starts per `periodMs` across all workers, in bursts of up to `burst`; null is unlimited.',
    resolve: (e) => e.rateLimit,
  }),
  keyRateLimit: t.field({
    type: RateLimitRef,
    nullable: true,
    description:
      "At most `count` starts per `periodMs` for each concurrency key (a job's concurrencyKey), across all workers, in bursts of up to `burst`; executions without a key are not limited per key. null is no per-key rate limit.",
    resolve: (e) => e.keyRateLimit,
  }),
  pausedAt: t.field({
    type: DateTimeScalar,
    nullable: true,
    description:
      'When the endpoint was paused (pauseEndpoint): none of its executions starts until resumeEndpoint, and attempts running then finish. null while it runs.',
    resolve: (e) => e.pausedAt,
  }),
  busiestKeys: t.field({
    type: [ConcurrencyKeyLoadRef],
    description:
      'For an endpoint that limits its keys (keyConcurrencyLimit or keyRateLimit): its busiest concurrency keys, up to 10, the most attempts in flight first, then the most waiting. Empty for an endpoint without per-key limits.',
    resolve: (e, _a, ctx) => ctx.service.busiestKeys(ctx.actor, e.id),
  }),
  retryAfterHold: t.field({
    type: RetryAfterHoldRef,
    nullable: true,
    description:
      "While the endpoint's target holds it: it answered 429 or 503 with Retry-After, and none of the endpoint's executions starts before `until` (resumeEndpoint lifts it). null when no hold is in force.",
    resolve: (e, _a, ctx) => ctx.service.retryAfterHold(ctx.actor, e.id),
  }),
}));

export const EndpointConnectionRef = connectionOf('Endpoint', EndpointRef, 'endpoint');

export const RateLimitInputRef = builder.inputType('RateLimitInput', {
  description: "A rate limit, an endpoint's or one per concurrency key: at most `count` starts per `periodMs`, across all workers.",
  fields: (t) => ({
    count: t.int({ required: true, description: 'Starts allowed per period, 1 to 1,000,000.' }),
    periodMs: t.int({ required: true, description: 'The period in milliseconds, 1000 (a second) to 86400000 (a day).' }),
    burst: t.int({ description: 'The most starts at once after a quiet spell, 1 to 1,000,000. Default `count`.' }),
  }),
});

const retryFields = (t: Parameters<Parameters<typeof builder.inputType>[1]['fields']>[0]) => ({
  maxAttempts: t.int({ description: 'Attempts per execution, 1 to 100, unless a job overrides it.' }),
  backoffBaseMs: t.int({ description: 'First retry delay in milliseconds. Default 1000.' }),
  backoffMaxMs: t.int({ description: 'Longest retry delay in milliseconds. Default 300000.' }),
  jitter: t.boolean({ description: 'Randomise retry delays (full jitter). Default true.' }),
  concurrencyLimit: t.int({ description: 'Most attempts in flight at once across all workers. Default unlimited.' }),
  keyConcurrencyLimit: t.int({
    description:
      "Most attempts in flight at once per job concurrencyKey, 1 to 10000, across all workers; claims then rotate between keys, so one key's backlog does not hold back another's. Default none; in updateEndpoint, null removes it.",
  }),
  defaultPriority: t.int({
    description:
      'The priority of jobs created without one, -100 to 100 (higher first). Default 0; in updateEndpoint, null sets it back to 0. Changes jobs created after it.',
  }),
  rateLimit: t.field({
    type: RateLimitInputRef,
    description: 'Most starts per period across all workers (a token bucket). Default unlimited; in updateEndpoint, null removes it.',
  }),
  keyRateLimit: t.field({
    type: RateLimitInputRef,
    description:
      'Most starts per period for each job concurrencyKey, across all workers (a token bucket per key); claims rotate between keys. Default none; in updateEndpoint, null removes it.',
  }),
  timeoutMs: t.int({ description: 'Per-attempt timeout in milliseconds.' }),
});

export const RegisterEndpointInputRef = builder.inputType('RegisterEndpointInput', {
  description: 'A new endpoint. HTTP endpoints need `url`; HANDLER endpoints need `handlerName`.',
  fields: (t) => ({
    name: t.string({ required: true, description: 'Dotted lowercase words, e.g. "billing.send-invoice".' }),
    description: t.string({ description: 'What the endpoint does, for people.' }),
    kind: t.field({ type: EndpointKindEnum, required: true, description: 'HTTP or HANDLER.' }),
    url: t.string({ description: 'HTTP: the http(s) URL; may contain `{{config.key}}` placeholders.' }),
    method: t.field({ type: HttpMethodEnum, description: 'HTTP: the method. Default POST.' }),
    headers: t.field({ type: JSONScalar, description: 'HTTP: extra headers, an object of name to string value.' }),
    signingSecret: t.string({ description: 'HTTP: secret (16+ characters) to sign requests with. Write-only.' }),
    handlerName: t.string({
      description: 'HANDLER: the name the handler is registered under in a worker (1-200 letters, digits, _ . : -).',
    }),
    payloadSpecId: t.id({ description: 'A payload spec that job input must satisfy.' }),
    configId: t.id({ description: 'A config for `{{config.key}}` templating.' }),
    ...retryFields(t),
  }),
});
export const registerEndpointValidation = zodInput(registerEndpointSchema);

export const UpdateEndpointInputRef = builder.inputType('UpdateEndpointInput', {
  description: 'Changes to an endpoint. Absent fields stay as they are; for `payloadSpecId` and `configId`, null removes the reference.',
  fields: (t) => ({
    id: t.id({ required: true, description: 'The endpoint to change.' }),
    description: t.string({ description: 'New description; null clears it.' }),
    url: t.string({ description: 'HTTP: new URL.' }),
    method: t.field({ type: HttpMethodEnum, description: 'HTTP: new method.' }),
    headers: t.field({ type: JSONScalar, description: 'HTTP: replaces all extra headers.' }),
    signingSecret: t.string({ description: 'HTTP: new signing secret; null stops signing. Write-only.' }),
    handlerName: t.string({ description: 'HANDLER: new handler name (1-200 letters, digits, _ . : -).' }),
    payloadSpecId: t.id({ description: 'New payload spec; null removes it.' }),
    configId: t.id({ description: 'New config; null removes it.' }),
    ...retryFields(t),
  }),
});
export const updateEndpointValidation = zodInput(updateEndpointSchema);
