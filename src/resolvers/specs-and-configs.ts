import { builder } from '../schema/builder.js';
import {
  ConfigConnectionRef,
  ConfigRef,
  createPayloadSpecValidation,
  CreatePayloadSpecInputRef,
  PayloadSpecConnectionRef,
  PayloadSpecRef,
  setConfigValidation,
  SetConfigInputRef,
  updatePayloadSpecValidation,
  UpdatePayloadSpecInputRef,
} from '../schema/specs-and-configs.js';
import { pageArgs } from '../schema/common.js';

builder.queryFields((t) => ({
  payloadSpecs: t.field({
    type: PayloadSpecConnectionRef,
    description: 'Payload specs of the workspace, newest first.',
    args: pageArgs(t.arg),
    resolve: (_root, args, ctx) => ctx.service.payloadSpecs(ctx.actor, args),
  }),
  payloadSpec: t.field({
    type: PayloadSpecRef,
    description: 'One payload spec. NOT_FOUND when no spec of your workspace has this id.',
    args: { id: t.arg.id({ required: true, description: 'The spec id.' }) },
    resolve: (_root, args, ctx) => ctx.service.payloadSpec(ctx.actor, String(args.id)),
  }),
  configs: t.field({
    type: ConfigConnectionRef,
    description: 'Configs of the workspace, newest first. Secret values are never returned.',
    args: pageArgs(t.arg),
    resolve: (_root, args, ctx) => ctx.service.configs(ctx.actor, args),
  }),
}));

builder.mutationFields((t) => ({
  createPayloadSpec: t.field({
    type: PayloadSpecRef,
    description: 'Creates a payload spec. VALIDATION_FAILED when the document is not a valid JSON Schema; CONFLICT when the name is taken.',
    args: {
      input: t.arg({ type: CreatePayloadSpecInputRef, required: true, description: 'The spec.', validate: createPayloadSpecValidation }),
    },
    resolve: (_root, args, ctx) => ctx.service.createPayloadSpec(ctx.actor, args.input as never),
  }),
  updatePayloadSpec: t.field({
    type: PayloadSpecRef,
    description: 'Changes a payload spec; a new schema bumps its version. Existing jobs are not re-validated.',
    args: {
      input: t.arg({ type: UpdatePayloadSpecInputRef, required: true, description: 'The changes.', validate: updatePayloadSpecValidation }),
    },
    resolve: (_root, args, ctx) => ctx.service.updatePayloadSpec(ctx.actor, args.input as never),
  }),
  setConfig: t.field({
    type: ConfigRef,
    description:
      'Creates a config, or replaces all entries of the config with that name. OPERATOR keys may replace only configs they created. A secret entry belongs to the key that writes it. CONFLICT when it would write secrets into a config that HTTP endpoints use whose url, headers or config another key (not an ADMIN) last set (extensions.endpoints names them); FORBIDDEN, VALIDATION_FAILED.',
    args: { input: t.arg({ type: SetConfigInputRef, required: true, description: 'The config.', validate: setConfigValidation }) },
    resolve: (_root, args, ctx) => ctx.service.setConfig(ctx.actor, args.input),
  }),
}));
