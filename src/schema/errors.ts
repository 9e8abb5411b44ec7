/**
 * The codes a client finds in `errors[].extensions.code`, published as an enum so that codegen
 * types them. No field returns it: GraphQL errors are not typed by the schema, so the enum is
 * the contract, and the masking in src/server/mask-error.ts gives nothing outside it.
 */
import { ERROR_CODES } from '../service/kernel/errors.js';
import { builder } from './builder.js';

/** Codes given by the GraphQL edge itself, before or around the service. */
const EDGE_CODES = {
  GRAPHQL_PARSE_FAILED: 'The document is not valid GraphQL syntax.',
  GRAPHQL_VALIDATION_FAILED: 'The document does not fit the schema, or exceeds a limit (depth, cost, aliases, tokens).',
  PAYLOAD_TOO_LARGE: 'The request body is larger than the gateway accepts (HTTP 413).',
  BAD_REQUEST:
    'The HTTP request itself cannot be read: a body that is not JSON or not an object, no `query`, a Content-Type the gateway does not read (HTTP 415), a batch of operations.',
  OPERATION_RESOLUTION_FAILURE:
    'The document holds more than one operation and `operationName` names none of them, or names one it does not hold.',
  PERSISTED_QUERY_NOT_FOUND:
    'Automatic persisted queries: the gateway does not hold the document of this hash (HTTP 404); send it again with the document.',
  PERSISTED_QUERY_MISMATCH: 'Automatic persisted queries: the document sent does not have the SHA-256 hash sent with it (HTTP 400).',
  PERSISTED_QUERY_ONLY:
    'The gateway runs only documents it knows by hash (JOBGATE_PERSISTED_ONLY): send `extensions.persistedQuery` without the document (HTTP 400).',
  INTERNAL_SERVER_ERROR: 'An unexpected failure; no detail is sent. The server log has it.',
} as const;

export const ErrorCodeEnum = builder.enumType('ErrorCode', {
  description:
    'Every value `errors[].extensions.code` takes. Switch on it, not on messages (which may change). ' +
    'A client should treat a code it does not know as INTERNAL_SERVER_ERROR.',
  values: Object.fromEntries(
    Object.entries({ ...ERROR_CODES, ...EDGE_CODES }).map(([code, description]) => [code, { description }]),
  ) as Record<keyof typeof ERROR_CODES | keyof typeof EDGE_CODES, { description: string }>,
});
