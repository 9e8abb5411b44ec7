/**
 * The schema's change policy: nothing a released client may use is removed or changed unless it
 * was deprecated in that release first. graphql-js's findBreakingChanges lists every change that
 * can break a client of the old schema; of those, only removals of what the old schema already
 * deprecated are allowed (and the types such removals leave unused).
 */
import {
  BreakingChangeType,
  buildSchema,
  findBreakingChanges,
  findDangerousChanges,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  type GraphQLSchema,
} from 'graphql';

export interface PolicyReport {
  /** Breaking changes the policy refuses: each names what changed. */
  refused: string[];
  /** Removals of what the baseline deprecated: allowed. */
  allowed: string[];
  /** Changes that are not breaking but may change what a client sees (e.g. a new enum value). */
  dangerous: string[];
}

/** Field and argument coordinates (`Type.field`, `Type.field(arg:)`) the baseline deprecated, and enum values (`Enum.VALUE`). */
function deprecatedCoordinates(schema: GraphQLSchema): Set<string> {
  const out = new Set<string>();
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__')) continue;
    if (isObjectType(type) || isInterfaceType(type)) {
      for (const field of Object.values(type.getFields())) {
        if (field.deprecationReason != null) out.add(`${type.name}.${field.name}`);
        for (const arg of field.args) if (arg.deprecationReason != null) out.add(`${type.name}.${field.name}(${arg.name}:)`);
      }
    } else if (isInputObjectType(type)) {
      for (const field of Object.values(type.getFields())) if (field.deprecationReason != null) out.add(`${type.name}.${field.name}`);
    } else if (isEnumType(type)) {
      for (const value of type.getValues()) if (value.deprecationReason != null) out.add(`${type.name}.${value.name}`);
    }
  }
  return out;
}

/**
 * The coordinate a breaking change is about, when it is a removal the policy may allow. graphql-js
 * words its descriptions "Type.field was removed.", "Type.field arg ARG was removed.",
 * "VALUE was removed from enum type Enum.", "Name was removed."; its change types are stable API.
 */
function removedCoordinate(type: BreakingChangeType, description: string): string | undefined {
  switch (type) {
    case BreakingChangeType.FIELD_REMOVED:
      return /^(\w+\.\w+) was removed\.$/.exec(description)?.[1];
    case BreakingChangeType.ARG_REMOVED: {
      const m = /^(\w+\.\w+) arg (\w+) was removed\.$/.exec(description);
      return m ? `${m[1]}(${m[2]}:)` : undefined;
    }
    case BreakingChangeType.VALUE_REMOVED_FROM_ENUM: {
      const m = /^(\w+) was removed from enum type (\w+)\.$/.exec(description);
      return m ? `${m[2]}.${m[1]}` : undefined;
    }
    default:
      return undefined;
  }
}

export function checkSchemaChange(baselineSdl: string, currentSdl: string): PolicyReport {
  const baseline = buildSchema(baselineSdl);
  const current = buildSchema(currentSdl);
  const deprecated = deprecatedCoordinates(baseline);
  const report: PolicyReport = { refused: [], allowed: [], dangerous: [] };
  for (const change of findBreakingChanges(baseline, current)) {
    const coordinate = removedCoordinate(change.type, change.description);
    // A client can reach a type only through a field, an argument or a union; removing each of
    // those is a change of its own, judged on its own. So a type that went is allowed: it went
    // because its last use went, and that use's removal was refused or allowed already.
    const allowed = change.type === BreakingChangeType.TYPE_REMOVED || (coordinate !== undefined && deprecated.has(coordinate));
    (allowed ? report.allowed : report.refused).push(`${change.type}: ${change.description}`);
  }
  for (const change of findDangerousChanges(baseline, current)) report.dangerous.push(`${change.type}: ${change.description}`);
  return report;
}
