/**
 * Counts GraphQL operations for the observer (src/service/kernel/observer.ts): by operation type and
 * outcome, over HTTP, SSE and WebSocket alike (WebSocket operations run through the same yoga
 * plugins). An operation is an `error` when its result carries errors; a subscription counts
 * once, when it is set up (its events are counted by the hub).
 */
import { getOperationAST, type DocumentNode, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Observer } from '../service/kernel/observer.js';

function typeOf(document: DocumentNode, operationName: string | null | undefined): string {
  return getOperationAST(document, operationName ?? undefined)?.operation ?? 'unknown';
}

const outcomeOf = (result: unknown): 'ok' | 'error' =>
  result && typeof result === 'object' && !(Symbol.asyncIterator in result) && ((result as ExecutionResult).errors?.length ?? 0) > 0
    ? 'error'
    : 'ok';

export function useObserveOperations(observer: Observer): Plugin {
  return {
    onExecute({ args }) {
      return {
        onExecuteDone({ result }) {
          observer.graphqlOperation(typeOf(args.document, args.operationName), outcomeOf(result));
        },
      };
    },
    onSubscribe() {
      return {
        onSubscribeResult({ result }) {
          observer.graphqlOperation('subscription', outcomeOf(result));
        },
      };
    },
  };
}
