/**
 * W3C Trace Context for HTTP deliveries (https://www.w3.org/TR/trace-context/#traceparent-header):
 * an execution is one trace, each attempt one span of it, so a target's tracing links every
 * retry of an execution together and to the execution.
 *
 * The trace id is the execution's id (a UUID: 16 bytes, as a trace id is; since migration 000058
 * its first six bytes are when it was made and its last seven random, as Trace Context level 2
 * asks of a trace id's right-most bytes), so it is the
 * same across the execution's retries and across workers without being stored, and an operator
 * holding a trace id from a target's tracing has the execution's id. The span id is new for each
 * attempt. The sampled flag is set: jobgate keeps every attempt's record, so the target may too.
 */
import { randomBytes } from 'node:crypto';

/** The trace id of an execution: its UUID's 32 hex digits. */
export function traceIdOf(executionId: string): string {
  const hex = executionId.replace(/-/g, '').toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(hex) || /^0+$/.test(hex)) throw new Error(`not an execution id: ${executionId}`);
  return hex;
}

/** A fresh span id: 8 random bytes, never all zero. */
export function newSpanId(): string {
  for (;;) {
    const id = randomBytes(8).toString('hex');
    if (id !== '0000000000000000') return id;
  }
}

/** The `traceparent` header of one attempt of an execution. */
export function traceparentFor(executionId: string, spanId = newSpanId()): string {
  return `00-${traceIdOf(executionId)}-${spanId}-01`;
}
