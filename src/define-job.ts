/**
 * The library's typed jobs (Jobgate.defineJob): one zod schema types the enqueue, parses the
 * handler's input, and is the endpoint's payload spec (as JSON Schema), so GraphQL's createJob on
 * the endpoint refuses what the typed enqueue refuses.
 */
import { z, type ZodType } from 'zod';
import type { HandlerFn, HandlerRegistry } from './service/engine/delivery/handler-registry.js';
import type { Actor } from './service/kernel/actor.js';
import { parseInput } from './service/kernel/context.js';
import type { CreateJobResult, DefinedJob, JobService, OuterTransaction } from './service/index.js';

export interface DefineJobOptions {
  /** The endpoint's description. Left out: left as it is. */
  description?: string;
  /** The endpoint's max attempts. Left out: left as it is (at first, the installation's default). */
  maxAttempts?: number;
  /** Who defines it (its workspace is the job's). Default: the embedding application, default workspace. */
  actor?: Actor;
}

export interface EnqueueOptions {
  /**
   * The caller's open transaction (a pg client after BEGIN, or a Kysely Transaction), as
   * `gate.inTransaction(tx)`: the job commits or rolls back with the caller's work.
   */
  tx?: OuterTransaction;
  /** Who enqueues. Default: the definition's actor. */
  actor?: Actor;
  /** Run at this time (a DELAYED job) rather than at once. */
  runAt?: Date | string;
  /** Enqueue once per key: a repeat returns the job it made (`created: false`). */
  idempotencyKey?: string;
  /** Executions holding the same lock key never run at once. */
  lockKey?: string;
  /** This job's max attempts. */
  maxAttempts?: number;
  /** Higher first, -100 to 100. Default: the endpoint's (0). */
  priority?: number;
  /** Counts against the endpoint's per-key limit (keyConcurrencyLimit), e.g. a customer's id. */
  concurrencyKey?: string;
  /** A name to find it by. */
  name?: string;
}

/** A typed job: `enqueue` takes what the schema takes. */
export interface JobDefinition<I> {
  name: string;
  /** The endpoint and payload spec as defined, and whether defining changed them. */
  defined: DefinedJob;
  /** Creates a job of it; input is checked by the schema first (VALIDATION_FAILED, at `input`). */
  enqueue(input: I, options?: EnqueueOptions): Promise<CreateJobResult>;
}

export interface DefineJobDeps {
  service: JobService;
  handlers: HandlerRegistry;
  defaultActor: Actor;
  /** The service acting in a caller's transaction (Jobgate.inTransaction's). */
  serviceIn(tx: OuterTransaction): JobService;
  /** Names this Jobgate defined, whose handlers a definition may replace. */
  defined: Set<string>;
}

/**
 * The payload spec of a schema: JSON Schema draft-07 of what it accepts (its input side). A type
 * JSON cannot carry (a Date, a bigint, a Map) is refused here: a job's input is stored and sent as
 * JSON, so `enqueue` would accept a Date that reaches the handler as a string its own parse then
 * refuses on every attempt.
 */
export function payloadSpecOf(name: string, schema: ZodType): Record<string, unknown> | boolean {
  let converted: Record<string, unknown>;
  try {
    converted = z.toJSONSchema(schema, { target: 'draft-7', io: 'input', unrepresentable: 'throw' }) as Record<string, unknown>;
  } catch (error) {
    throw new TypeError(
      `defineJob("${name}"): ${(error as Error).message}: a job's input travels as JSON ` +
        '(for a time, use z.iso.datetime(); for a big integer, a string)',
      { cause: error },
    );
  }
  const { $schema: _dialect, ...spec } = converted;
  return spec;
}

export async function defineJob<S extends ZodType>(
  deps: DefineJobDeps,
  name: string,
  schema: S,
  handler: HandlerFn<z.output<S>>,
  options: DefineJobOptions = {},
): Promise<JobDefinition<z.input<S>>> {
  const actor = options.actor ?? deps.defaultActor;
  // A name another registration (gate.handle) owns is refused, as registering it twice is.
  if (deps.handlers.get(name) && !deps.defined.has(name)) throw new Error(`a handler named "${name}" is already registered`);
  const defined = await deps.service.defineJob(actor, {
    name,
    jsonSchema: payloadSpecOf(name, schema),
    description: options.description ?? null,
    maxAttempts: options.maxAttempts ?? null,
  });
  deps.handlers.replace(name, schema, handler as HandlerFn);
  deps.defined.add(name);
  return {
    name,
    defined,
    async enqueue(input, { tx, actor: as = actor, runAt, ...rest } = {}) {
      parseInput(schema, input, ['input']);
      const service = tx ? deps.serviceIn(tx) : deps.service;
      return service.createJob(as, {
        endpointName: name,
        kind: runAt === undefined ? 'IMMEDIATE' : 'DELAYED',
        input: input as never,
        ...(runAt === undefined ? {} : { runAt }),
        ...rest,
      });
    },
  };
}
