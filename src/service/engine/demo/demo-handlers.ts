/**
 * The quick start's handlers: something local for a newcomer to call on a machine with no network,
 * whose success, retries and progress can be watched. Registered by `jobgate start | worker` when
 * the configuration asks for them (JOBGATE_DEMO_HANDLERS; by default on the embedded default
 * outside production only: a demo handler in a production gateway would be a surprise, and a
 * `demo.*` HANDLER endpoint there would run code nobody deployed on purpose).
 *
 *   demo.echo   HANDLER: succeeds at once, whatever its input.
 *   demo.flaky  HANDLER: fails its first `failAttempts` attempts (default 2), then succeeds, so the
 *               endpoint's retry policy can be watched.
 *   demo.scan   RECOVERABLE: walks `items` items (default 40) in batches of `batch` (default 5),
 *               `delayMs` apart (default 500), checkpointing each batch and recording a finding
 *               for every tenth item; stops at the next batch when cancelled.
 *
 * They are ordinary handlers, registered through the same registries as a library's.
 */
import { z } from 'zod';
import { HandlerRegistry } from '../delivery/handler-registry.js';
import { outcome, RecoverableRegistry } from '../runs/recoverable.js';

const echoInput = z.unknown();
// No input (null) takes every default.
const flakyInput = z.preprocess((v) => v ?? {}, z.looseObject({ failAttempts: z.number().int().min(0).max(100).default(2) }));
const scanParams = z.preprocess(
  (v) => v ?? {},
  z.object({
    items: z.number().int().min(1).max(10_000).default(40),
    batch: z.number().int().min(1).max(1_000).default(5),
    delayMs: z.number().int().min(0).max(60_000).default(500),
  }),
);

export const DEMO_HANDLER_NAMES = ['demo.echo', 'demo.flaky'] as const;
export const DEMO_RECOVERABLE_NAMES = ['demo.scan'] as const;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Adds the demo handlers to `handlers` and `recoverables` (made when not given); returns both. */
export function registerDemoHandlers(
  handlers: HandlerRegistry = new HandlerRegistry(),
  recoverables: RecoverableRegistry = new RecoverableRegistry(),
): { handlers: HandlerRegistry; recoverables: RecoverableRegistry } {
  handlers.register('demo.echo', echoInput, () => undefined);
  handlers.register('demo.flaky', flakyInput, (input: z.infer<typeof flakyInput>, ctx) => {
    if (ctx.attempt <= input.failAttempts) {
      throw new Error(`demo.flaky: attempt ${ctx.attempt} fails on purpose (the first ${input.failAttempts} do)`);
    }
    return { succeededOnAttempt: ctx.attempt };
  });
  recoverables.register({
    name: 'demo.scan',
    params: scanParams,
    async run(store, params: z.infer<typeof scanParams>) {
      let next = ((await store.loadCursor()) as { next: number } | null)?.next ?? 0;
      while (next < params.items) {
        if ((await store.status()) === 'CANCEL_REQUESTED') return outcome.paused({ next });
        const end = Math.min(params.items, next + params.batch);
        for (let item = next; item < end; item++) {
          if ((item + 1) % 10 === 0) {
            await store.recordFinding({ kind: 'demo.tenth', severity: 'INFO', resourceId: `item-${item + 1}`, detail: { item: item + 1 } });
          }
        }
        await sleep(params.delayMs);
        await store.checkpoint({ next: end }, { processed: end - next, total: params.items, stats: { batches: 1 } });
        next = end;
      }
      return outcome.completed();
    },
  });
  return { handlers, recoverables };
}
