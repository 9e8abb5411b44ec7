/**
 * What a handler's name may be: recoverable, interval and in-process handlers, the runs and
 * schedules named after them. One definition for every check in TypeScript; the schema restates
 * it in the CHECKs on `runs.name`, `run_schedules.name` and `interval_handlers.name`, and
 * test/db/names.test.ts fails when the two part.
 */
export const HANDLER_NAME = /^[A-Za-z0-9_.:-]{1,200}$/;

/** The rule in words, for a refusal. */
export const HANDLER_NAME_RULE = 'must be 1-200 letters, digits, _ . : -';

/** Whether `name` is a handler's name. */
export function isHandlerName(name: string): boolean {
  return HANDLER_NAME.test(name);
}
