import { createPayloadSpecSchema, setConfigSchema, updatePayloadSpecSchema } from '../service/kernel/inputs.js';
import type { Config, ConfigEntryView, PayloadSpec } from '../service/kernel/models.js';
import { builder } from './builder.js';
import { connectionOf, DateTimeScalar, JSONScalar, nodeId, zodInput } from './common.js';

export const PayloadSpecRef = builder.nodeRef<PayloadSpec>('PayloadSpec', { id: nodeId() }).implement({
  description:
    'A JSON Schema that the input of every job on an endpoint referring to it must satisfy. ' +
    'Job creation is refused with VALIDATION_FAILED, naming the bad field, when it does not.',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'Unique name in the workspace, dotted lowercase.' }),
    description: t.exposeString('description', { nullable: true, description: 'What the payload is, for people.' }),
    jsonSchema: t.field({ type: JSONScalar, description: 'The JSON Schema document.', resolve: (s) => s.jsonSchema }),
    version: t.exposeInt('version', { description: 'Starts at 1; each schema change adds one.' }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When the spec was created.', resolve: (s) => s.createdAt }),
    updatedAt: t.field({ type: DateTimeScalar, description: 'When the spec last changed.', resolve: (s) => s.updatedAt }),
  }),
});

export const PayloadSpecConnectionRef = connectionOf('PayloadSpec', PayloadSpecRef, 'payload spec');

export const ConfigEntryRef = builder.objectRef<ConfigEntryView>('ConfigEntry').implement({
  description: 'One key of a config. Secret values are write-only: they are used by templating but never returned.',
  fields: (t) => ({
    key: t.exposeString('key', { description: 'The key, used as `{{config.<key>}}` in templates.' }),
    value: t.exposeString('value', { nullable: true, description: 'The value; null when the entry is secret.' }),
    secret: t.exposeBoolean('secret', { description: 'Whether the value is secret (never returned, never logged).' }),
  }),
});

export const ConfigRef = builder.nodeRef<Config>('Config', { id: nodeId() }).implement({
  description: 'Named values for templating: an endpoint referring to a config may use `{{config.key}}` in its url, headers and body.',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'Unique name in the workspace, dotted lowercase.' }),
    entries: t.field({ type: [ConfigEntryRef], description: 'The entries, sorted by key.', resolve: (c) => c.entries }),
    createdAt: t.field({ type: DateTimeScalar, description: 'When the config was created.', resolve: (c) => c.createdAt }),
    updatedAt: t.field({ type: DateTimeScalar, description: 'When the config last changed.', resolve: (c) => c.updatedAt }),
  }),
});

export const ConfigConnectionRef = connectionOf('Config', ConfigRef, 'config');

export const CreatePayloadSpecInputRef = builder.inputType('CreatePayloadSpecInput', {
  description: 'A new payload spec.',
  fields: (t) => ({
    name: t.string({ required: true, description: 'Unique name in the workspace, dotted lowercase, e.g. "billing.invoice".' }),
    description: t.string({ description: 'What the payload is, for people.' }),
    jsonSchema: t.field({ type: JSONScalar, required: true, description: 'A JSON Schema document; it is itself validated.' }),
  }),
});
export const createPayloadSpecValidation = zodInput(createPayloadSpecSchema);

export const UpdatePayloadSpecInputRef = builder.inputType('UpdatePayloadSpecInput', {
  description: 'Changes to a payload spec. Absent fields stay as they are.',
  fields: (t) => ({
    id: t.id({ required: true, description: 'The spec to change.' }),
    description: t.string({ description: 'New description; null clears it.' }),
    jsonSchema: t.field({ type: JSONScalar, description: 'New JSON Schema document; bumps `version`.' }),
  }),
});
export const updatePayloadSpecValidation = zodInput(updatePayloadSpecSchema);

export const ConfigEntryInputRef = builder.inputType('ConfigEntryInput', {
  description: 'One key of a config.',
  fields: (t) => ({
    key: t.string({ required: true, description: 'Letters, digits, `_`, `.`, `-`; starting with a letter or `_`.' }),
    value: t.string({ required: true, description: 'The value, as a string.' }),
    secret: t.boolean({ description: 'Secret values are write-only: never returned by the API. Default false.' }),
  }),
});

export const SetConfigInputRef = builder.inputType('SetConfigInput', {
  description: 'The full content of a config: it is created, or its entries are replaced by exactly these.',
  fields: (t) => ({
    name: t.string({ required: true, description: 'Unique name in the workspace, dotted lowercase.' }),
    entries: t.field({ type: [ConfigEntryInputRef], required: true, description: 'All entries of the config.' }),
  }),
});
export const setConfigValidation = zodInput(setConfigSchema);
