/**
 * Limits on what one GraphQL request may ask for. Defaults (README "Limits"):
 *
 *   depth 12, aliases 20, directives 20, tokens 3,000, cost 10,000 (graphql-armor), with
 *   introspection exempt from depth and cost but held by its own depth rule (15 levels below
 *   __schema/__type, through fragments, cycle-safe) — the full getIntrospectionQuery() that code
 *   generators send passes every limit. Field suggestions ("Did you mean…") are never sent.
 *   Request bodies are capped (JOBGATE_MAX_BODY_BYTES, default 1 MB); batching is off.
 *   Browser requests that skip CORS preflight need a custom header (CSRF prevention).
 *
 * Introspection can be turned off with JOBGATE_INTROSPECTION=off.
 */
import { EnvelopArmor } from '@escape.tech/graphql-armor';
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import {
  GraphQLError,
  Kind,
  NoSchemaIntrospectionCustomRule,
  type ASTVisitor,
  type FragmentDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';

export const LIMITS = Object.freeze({
  depth: 12,
  aliases: 20,
  directives: 20,
  tokens: 3000,
  cost: 10_000,
  introspectionDepth: 15,
});

/**
 * Depth of selections below `__schema` / `__type`, following fragment spreads (each fragment at
 * most once per path, so cyclic fragments end). A fragment *named* `__schema` does not count as
 * introspection: only the fields do.
 */
export function introspectionDepthRule(max: number) {
  return (context: ValidationContext): ASTVisitor => {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const def of context.getDocument().definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
    const depthOf = (set: SelectionSetNode | undefined, path: Set<string>): number => {
      if (!set) return 0;
      let deepest = 0;
      for (const sel of set.selections) {
        if (sel.kind === Kind.FIELD) deepest = Math.max(deepest, sel.selectionSet ? 1 + depthOf(sel.selectionSet, path) : 1);
        else if (sel.kind === Kind.INLINE_FRAGMENT) deepest = Math.max(deepest, depthOf(sel.selectionSet, path));
        else {
          const name = sel.name.value;
          if (path.has(name)) continue;
          const next = new Set(path).add(name);
          deepest = Math.max(deepest, depthOf(fragments.get(name)?.selectionSet, next));
        }
      }
      return deepest;
    };
    const check = (set: SelectionSetNode | undefined, path: Set<string>) => {
      if (!set) return;
      for (const sel of set.selections) {
        if (sel.kind === Kind.FIELD) {
          if (sel.name.value === '__schema' || sel.name.value === '__type') {
            const depth = depthOf(sel.selectionSet, path);
            if (depth > max) {
              context.reportError(new GraphQLError(`Introspection is limited to a depth of ${max}; this query goes ${depth} deep.`, { nodes: [sel] }));
            }
          } else check(sel.selectionSet, path);
        } else if (sel.kind === Kind.INLINE_FRAGMENT) check(sel.selectionSet, path);
        else if (!path.has(sel.name.value)) check(fragments.get(sel.name.value)?.selectionSet, new Set(path).add(sel.name.value));
      }
    };
    return {
      OperationDefinition(node) {
        check(node.selectionSet, new Set());
      },
    };
  };
}

export function hardeningPlugins(options: { introspection: boolean }): Plugin[] {
  const armor = new EnvelopArmor({
    maxDepth: { n: LIMITS.depth, ignoreIntrospection: true, flattenFragments: true },
    costLimit: { maxCost: LIMITS.cost, ignoreIntrospection: true, flattenFragments: true },
    maxAliases: { n: LIMITS.aliases },
    maxDirectives: { n: LIMITS.directives },
    maxTokens: { n: LIMITS.tokens },
    blockFieldSuggestion: { enabled: true },
  });
  const rules: Plugin = {
    onValidate({ addValidationRule }) {
      addValidationRule(introspectionDepthRule(LIMITS.introspectionDepth));
      if (!options.introspection) addValidationRule(NoSchemaIntrospectionCustomRule);
    },
  };
  return [...(armor.protect().plugins as Plugin[]), rules, useCSRFPrevention({ requestHeaders: ['x-jobgate-csrf', 'authorization'] })];
}
