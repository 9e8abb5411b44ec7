/**
 * Limits on what one GraphQL request may ask for. Defaults (docs/security.md, "Limits"):
 *
 *   depth 12, aliases 20, directives 20, tokens 3,000, cost 10,000 (graphql-armor's model: a
 *   list is priced at its `first`, a variable's value or default included; a list with no
 *   `first` is priced as one item, although it returns the default page), with
 *   introspection exempt from depth and cost but held by its own depth rule (15 levels below
 *   __schema/__type, through fragments, cycle-safe) — the full getIntrospectionQuery() that code
 *   generators send passes every limit. Suggestions ("Did you mean…", for fields, arguments,
 *   types, input fields and enum values, in validation and in variable coercion) are never sent.
 *   Request bodies are capped (JOBGATE_MAX_BODY_BYTES, default 1 MB); batching is off.
 *   Browser requests that skip CORS preflight need a custom header (CSRF prevention).
 *
 * Introspection can be turned off with JOBGATE_INTROSPECTION=off; federation's `_service { sdl }`
 * (src/schema/federation.ts) is the schema by another name and closes with it.
 */
import { EnvelopArmor } from '@escape.tech/graphql-armor';
import { costLimitRule, type CostLimitOptions } from '@escape.tech/graphql-armor-cost-limit';
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import { ticketOf } from './ticket.js';
import {
  getOperationAST,
  GraphQLError,
  Kind,
  NoSchemaIntrospectionCustomRule,
  validate,
  visit,
  type ASTVisitor,
  type DocumentNode,
  type ExecutionArgs,
  type FieldNode,
  type FragmentDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { MAX_REFERENCES } from '../schema/federation.js';

export const LIMITS = Object.freeze({
  depth: 12,
  aliases: 20,
  directives: 20,
  tokens: 3000,
  cost: 10_000,
  introspectionDepth: 15,
});

const isIntrospection = (field: FieldNode) => field.name.value === '__schema' || field.name.value === '__type';

/**
 * Depth of a selection set, following fragment spreads, leaving out the fields `skip` says to.
 * Each fragment's depth is computed once and memoised (a spread that is already being computed
 * counts as 0: a cycle, which graphql's own NoFragmentCycles rule refuses), so the work is linear
 * in the document: fragments that spread each other twice per level cannot blow it up.
 */
function depthCounter(context: ValidationContext, skip: (field: FieldNode) => boolean) {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const def of context.getDocument().definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
  const fragmentDepth = new Map<string, number>();
  const inProgress = new Set<string>();
  const depthOf = (set: SelectionSetNode | undefined): number => {
    if (!set) return 0;
    let deepest = 0;
    for (const sel of set.selections) {
      if (sel.kind === Kind.FIELD) {
        if (!skip(sel)) deepest = Math.max(deepest, sel.selectionSet ? 1 + depthOf(sel.selectionSet) : 1);
      } else if (sel.kind === Kind.INLINE_FRAGMENT) deepest = Math.max(deepest, depthOf(sel.selectionSet));
      else deepest = Math.max(deepest, depthOfFragment(sel.name.value));
    }
    return deepest;
  };
  const depthOfFragment = (name: string): number => {
    const known = fragmentDepth.get(name);
    if (known !== undefined) return known;
    if (inProgress.has(name)) return 0;
    inProgress.add(name);
    const depth = depthOf(fragments.get(name)?.selectionSet);
    inProgress.delete(name);
    fragmentDepth.set(name, depth);
    return depth;
  };
  return { fragments, depthOf };
}

/**
 * Depth of an operation, introspection left out: both `__schema` and `__type` are held by
 * `introspectionDepthRule` instead. (graphql-armor's maxDepth exempts only `__schema`, so a tool
 * asking `__type(name:) { ...FullType }` with graphql's own fragments went 14 deep and was
 * refused.) Counted as graphql-armor counts, with its message less its "Syntax Error:" (the
 * document parsed).
 */
export function queryDepthRule(max: number) {
  return (context: ValidationContext): ASTVisitor => {
    const { depthOf } = depthCounter(context, isIntrospection);
    return {
      OperationDefinition(node) {
        const depth = depthOf(node.selectionSet);
        if (depth > max) context.reportError(new GraphQLError(`Query depth limit of ${max} exceeded, found ${depth}.`));
      },
    };
  };
}

/**
 * Depth of selections below `__schema` / `__type`, following fragment spreads (see
 * `depthCounter`). A fragment *named* `__schema` does not count as introspection: only the
 * fields do.
 */
export function introspectionDepthRule(max: number) {
  return (context: ValidationContext): ASTVisitor => {
    const { fragments, depthOf } = depthCounter(context, () => false);
    // Where introspection fields sit: each selection set (operation or fragment) is scanned once.
    const scanned = new Set<string>();
    const check = (set: SelectionSetNode | undefined) => {
      if (!set) return;
      for (const sel of set.selections) {
        if (sel.kind === Kind.FIELD) {
          if (isIntrospection(sel)) {
            const depth = depthOf(sel.selectionSet);
            if (depth > max) {
              context.reportError(
                new GraphQLError(`Introspection is limited to a depth of ${max}; this query goes ${depth} deep.`, { nodes: [sel] }),
              );
            }
          } else check(sel.selectionSet);
        } else if (sel.kind === Kind.INLINE_FRAGMENT) check(sel.selectionSet);
        else if (!scanned.has(sel.name.value)) {
          scanned.add(sel.name.value);
          check(fragments.get(sel.name.value)?.selectionSet);
        }
      }
    };
    return {
      OperationDefinition(node) {
        check(node.selectionSet);
      },
    };
  };
}

const COST: CostLimitOptions = { maxCost: LIMITS.cost, ignoreIntrospection: true, flattenFragments: true };
/** The largest page a list returns (the service refuses a larger `first` with VALIDATION_FAILED). */
const MAX_PAGE = 100;

/**
 * The document as the cost model should see it when it runs: graphql-armor multiplies a list's
 * cost by its `first` only when that is a literal, so `first: $n` was priced as one item and
 * `runConnection(first: $n) { nodes { findings(first: $m) ... } }` with n = m = 100 (10,000
 * findings) passed a limit its literal twin fails 26 times over. Each variable `first` becomes
 * the literal it will be (its value, or its default), at most the largest page: a larger one is
 * refused by its list, with the field's own error. Federation's `_entities` is priced per
 * reference (`perReference`). Undefined when neither was there: validation has already priced
 * the document exactly.
 */
function withPageSizes(args: Pick<ExecutionArgs, 'document' | 'variableValues' | 'operationName'>): ExecutionArgs['document'] | undefined {
  // The variables are the operation's that runs: the others in the document are left out.
  const operation = getOperationAST(args.document, args.operationName);
  if (!operation) return undefined;
  const values = args.variableValues ?? {};
  const defaults = new Map<string, unknown>();
  for (const v of operation.variableDefinitions ?? [])
    if (v.defaultValue?.kind === Kind.INT) defaults.set(v.variable.name.value, Number(v.defaultValue.value));
  const document = {
    ...args.document,
    definitions: args.document.definitions.filter((d) => d === operation || d.kind === Kind.FRAGMENT_DEFINITION),
  };
  let changed = false;
  const priced = visit(document, {
    SelectionSet(node): SelectionSetNode | undefined {
      const expanded = perReference(node, values);
      if (expanded) changed = true;
      return expanded;
    },
    Field(node): FieldNode | undefined {
      const first = node.arguments?.find((a) => a.name.value === 'first');
      if (first?.value.kind !== Kind.VARIABLE) return undefined;
      const name = first.value.name.value;
      const value = name in values ? values[name] : defaults.get(name);
      // Anything else is refused when the variable is coerced, or means the default page.
      if (typeof value !== 'number' || !Number.isInteger(value)) return undefined;
      changed = true;
      return {
        ...node,
        arguments: node.arguments!.map((a) =>
          a === first ? { ...a, value: { kind: Kind.INT, value: String(Math.min(value, MAX_PAGE)) } } : a,
        ),
      };
    },
  });
  return changed ? priced : undefined;
}

/**
 * Whether validation may have priced the document short: a list that takes its `first` from a
 * variable, or federation's `_entities`, which the cost model prices as one item whatever the
 * number of references it is given.
 */
function needsRepricing(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Argument(node) {
      if (node.name.value === 'first' && node.value.kind === Kind.VARIABLE) found = true;
    },
    Field(node) {
      if (node.name.value === '_entities') found = true;
    },
  });
  return found;
}

/** How many references an `_entities` field is given (its literal list, or its variable's value), at most MAX_REFERENCES + 1. */
function referenceCount(node: FieldNode, values: Record<string, unknown>): number {
  const arg = node.arguments?.find((a) => a.name.value === 'representations')?.value;
  const count =
    arg?.kind === Kind.LIST
      ? arg.values.length
      : arg?.kind === Kind.VARIABLE && Array.isArray(values[arg.name.value])
        ? (values[arg.name.value] as unknown[]).length
        : 1;
  // Past the cap the field refuses to resolve anything (src/schema/federation.ts).
  return Math.max(1, Math.min(count, MAX_REFERENCES + 1));
}

/**
 * Each `_entities` of a selection set as many times as it has references (aliased), so the cost
 * model adds up one copy of the entity's selection per reference, as it prices a list by its page.
 */
function perReference(node: SelectionSetNode, values: Record<string, unknown>): SelectionSetNode | undefined {
  if (!node.selections.some((s) => s.kind === Kind.FIELD && s.name.value === '_entities')) return undefined;
  return {
    ...node,
    selections: node.selections.flatMap((s) => {
      if (s.kind !== Kind.FIELD || s.name.value !== '_entities') return [s];
      return Array.from({ length: referenceCount(s, values) }, (_, i) => ({ ...s, alias: { kind: Kind.NAME, value: `_reference${i}` } }));
    }),
  };
}

/**
 * Prices the operation again with the page sizes its lists will use (see `withPageSizes`), before
 * it runs. Whether a document needs it at all is worked out once per document (yoga's parser
 * cache hands the same document object to every request that sends the same text): walking
 * every document on every request was 2 % of a createJob's CPU in the gateway.
 */
function usePagedCostLimit(): Plugin {
  const needsPricing = new WeakMap<DocumentNode, boolean>();
  const check = (args: ExecutionArgs): GraphQLError | undefined => {
    let needed = needsPricing.get(args.document);
    if (needed === undefined) needsPricing.set(args.document, (needed = needsRepricing(args.document)));
    if (!needed) return undefined;
    const priced = withPageSizes(args);
    if (!priced) return undefined;
    const errors: GraphQLError[] = [];
    validate(args.schema, priced, [
      costLimitRule({ ...COST, propagateOnRejection: false, onReject: [(_context, error) => void errors.push(error)] }),
    ]);
    return errors[0];
  };
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const error = check(args);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      const error = check(args);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
  };
}

/**
 * graphql-js ends a message with a suggestion: `Did you mean "a" or "b"?`, `Did you mean the enum
 * value "X"?`. GraphQL names cannot hold a `?`, so the suggestion runs to the first one.
 */
const SUGGESTION = /\s*Did you mean\b[^?]*\?/g;

/** The error with any "Did you mean …?" taken out of its message (the same error when there is none). */
export function withoutSuggestions(error: GraphQLError): GraphQLError {
  return withMessage(error, error.message.replace(SUGGESTION, ''));
}

/**
 * The error with another message, and the same location, path, cause and extensions (the same
 * error when the message is unchanged): messages are read-only, so a rewording is a new error.
 */
export function withMessage(error: GraphQLError, message: string, extensions = error.extensions): GraphQLError {
  if (message === error.message && extensions === error.extensions) return error;
  return new GraphQLError(message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions,
  });
}

/**
 * Suggestions name parts of the schema ("Did you mean …"), so errors would map it for a key
 * even with introspection closed. Validation errors lose theirs here (HTTP and WebSocket both
 * validate through envelop); execution errors, variable coercion among them, in the error
 * masking (./mask-error.ts). They also lose graphql-armor's "Syntax Error:" (its alias and
 * directive limits): a document being validated has parsed.
 */
function useValidationMessages(): Plugin {
  return {
    onValidate:
      () =>
      ({ valid, result, setResult }) => {
        if (!valid)
          setResult(result.map((error) => (error instanceof GraphQLError ? withoutSyntaxPrefix(withoutSuggestions(error)) : error)));
      },
  };
}

/** The error without graphql-armor's "Syntax Error: " (the document it refuses has parsed). */
export function withoutSyntaxPrefix(error: GraphQLError): GraphQLError {
  return withMessage(error, error.message.replace(/^Syntax Error: /, ''));
}

export function hardeningPlugins(options: { introspection: boolean }): Plugin[] {
  const armor = new EnvelopArmor({
    // Depth is queryDepthRule's: it exempts `__type` as well as `__schema`.
    maxDepth: { enabled: false },
    costLimit: { ...COST },
    // Every alias counts: graphql-armor exempts aliases of `__typename` by default, and 900 of
    // them each cost a resolver call and an output key while aliases of real fields are refused.
    maxAliases: { n: LIMITS.aliases, allowList: [] },
    maxDirectives: { n: LIMITS.directives },
    maxTokens: { n: LIMITS.tokens },
    // Its mask misses enum values ("Did you mean the enum value …?") and never sees variable
    // coercion (an execution error): `useValidationMessages` and the error masking do it instead.
    blockFieldSuggestion: { enabled: false },
  });
  const rules: Plugin = {
    onValidate({ addValidationRule }) {
      addValidationRule(queryDepthRule(LIMITS.depth));
      addValidationRule(introspectionDepthRule(LIMITS.introspectionDepth));
      if (!options.introspection) {
        addValidationRule(NoSchemaIntrospectionCustomRule);
        addValidationRule(noSubgraphSdlRule);
      }
    },
  };
  return [...(armor.protect().plugins as Plugin[]), rules, useValidationMessages(), usePagedCostLimit(), csrfUnlessTicket()];
}

/** Federation's `_service` on the root: refused as `__schema` is when introspection is off. */
function noSubgraphSdlRule(context: ValidationContext): ASTVisitor {
  return {
    Field(node) {
      if (node.name.value === '_service' && context.getParentType() === context.getSchema().getQueryType())
        context.reportError(
          new GraphQLError('GraphQL introspection has been disabled, but the requested query contained the field "_service".', {
            nodes: node,
          }),
        );
    },
  };
}

/**
 * CSRF prevention (a custom header forces a preflight), except for a request that carries a
 * subscription ticket: an EventSource cannot send a header, and CSRF needs a credential the
 * browser adds by itself (a cookie), which a ticket in the URL is not: only a page that minted
 * it knows it. A request with no credential at all never gets here: it is answered 401 first
 * (./authenticate-first.ts). Since every jobgate credential is a header or a ticket that a
 * browser never adds by itself, this check is defence in depth, for the day one is.
 */
function csrfUnlessTicket(): Plugin {
  const csrf = useCSRFPrevention({ requestHeaders: ['x-jobgate-csrf', 'authorization'] });
  return {
    onRequestParse(payload) {
      if (ticketOf(payload.request) !== null) return;
      return csrf.onRequestParse!(payload);
    },
  };
}
