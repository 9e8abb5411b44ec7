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
 * Depth of selections below `__schema` / `__type`, following fragment spreads. Each fragment's
 * depth is computed once and memoised (a spread that is already being computed counts as 0: a
 * cycle, which graphql's own NoFragmentCycles rule refuses), so the work is linear in the
 * document: fragments that spread each other twice per level cannot blow it up. A fragment
 * *named* `__schema` does not count as introspection: only the fields do.
 */
export function introspectionDepthRule(max: number) {
  return (context: ValidationContext): ASTVisitor => {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const def of context.getDocument().definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
    const fragmentDepth = new Map<string, number>();
    const inProgress = new Set<string>();
    const depthOf = (set: SelectionSetNode | undefined): number => {
      if (!set) return 0;
      let deepest = 0;
      for (const sel of set.selections) {
        if (sel.kind === Kind.FIELD) deepest = Math.max(deepest, sel.selectionSet ? 1 + depthOf(sel.selectionSet) : 1);
        else if (sel.kind === Kind.INLINE_FRAGMENT) deepest = Math.max(deepest, depthOf(sel.selectionSet));
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
    // Where introspection fields sit: each selection set (operation or fragment) is scanned once.
    const scanned = new Set<string>();
    const check = (set: SelectionSetNode | undefined) => {
      if (!set) return;
      for (const sel of set.selections) {
        if (sel.kind === Kind.FIELD) {
          if (sel.name.value === '__schema' || sel.name.value === '__type') {
            const depth = depthOf(sel.selectionSet);
            if (depth > max) {
              context.reportError(new GraphQLError(`Introspection is limited to a depth of ${max}; this query goes ${depth} deep.`, { nodes: [sel] }));
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
