import {
  AlertConnectionRef,
  AlertEventRef,
  AlertRef,
  AlertRuleConnectionRef,
  AlertRuleRef,
  createAlertRuleValidation,
  CreateAlertRuleInputRef,
  SetJobAlertsOptOutInputRef,
  SetJobAlertsOptOutPayloadRef,
  setJobAlertsOptOutValidation,
  updateAlertRuleValidation,
  UpdateAlertRuleInputRef,
} from '../schema/alert.js';
import { builder } from '../schema/builder.js';
import { pageArgs } from '../schema/common.js';

builder.queryFields((t) => ({
  alertRules: t.field({
    type: AlertRuleConnectionRef,
    description:
      'Alert rules of the workspace, newest first. ADMIN only (FORBIDDEN otherwise): rules hold email addresses and webhook destinations.',
    args: pageArgs(t.arg),
    resolve: (_root, args, ctx) => ctx.service.alertRules(ctx.actor, args),
  }),
  alertRule: t.field({
    type: AlertRuleRef,
    description: 'One alert rule. ADMIN only (FORBIDDEN otherwise). NOT_FOUND when no live rule of your workspace has this id.',
    args: { id: t.arg.id({ required: true, description: 'The rule id.' }) },
    resolve: (_root, args, ctx) => ctx.service.alertRule(ctx.actor, String(args.id)),
  }),
  alerts: t.field({
    type: AlertConnectionRef,
    description:
      'Alerts (notifications) of the workspace, newest first, optionally of one rule. Every role: an alert says what happened, never to whom it was sent.',
    args: { ...pageArgs(t.arg), ruleId: t.arg.id({ description: 'Only alerts raised by this rule.' }) },
    resolve: (_root, { ruleId, ...page }, ctx) => ctx.service.alerts(ctx.actor, { ruleId: ruleId == null ? null : String(ruleId) }, page),
  }),
  alert: t.field({
    type: AlertRef,
    description: 'One alert. NOT_FOUND when no alert of your workspace has this id.',
    args: { id: t.arg.id({ required: true, description: 'The alert id.' }) },
    resolve: (_root, args, ctx) => ctx.service.alert(ctx.actor, String(args.id)),
  }),
}));

builder.mutationFields((t) => ({
  createAlertRule: t.field({
    type: AlertRuleRef,
    description:
      'Creates an alert rule. ADMIN only (FORBIDDEN otherwise). VALIDATION_FAILED, NOT_FOUND (a job or endpoint not in the workspace), CONFLICT (name taken).',
    args: {
      input: t.arg({ type: CreateAlertRuleInputRef, required: true, description: 'The rule.', validate: createAlertRuleValidation }),
    },
    resolve: (_root, args, ctx) => ctx.service.createAlertRule(ctx.actor, args.input as never),
  }),
  updateAlertRule: t.field({
    type: AlertRuleRef,
    description:
      'Changes an alert rule; what is firing and the rate-limit windows are kept. ADMIN only. NOT_FOUND, VALIDATION_FAILED, CONFLICT.',
    args: {
      input: t.arg({ type: UpdateAlertRuleInputRef, required: true, description: 'The changes.', validate: updateAlertRuleValidation }),
    },
    resolve: (_root, args, ctx) => ctx.service.updateAlertRule(ctx.actor, args.input as never),
  }),
  deleteAlertRule: t.field({
    type: AlertRuleRef,
    description: 'Deletes an alert rule: it stops at once; the alerts it raised stay. ADMIN only. NOT_FOUND.',
    args: { id: t.arg.id({ required: true, description: 'The rule id.' }) },
    resolve: (_root, args, ctx) => ctx.service.deleteAlertRule(ctx.actor, String(args.id)),
  }),
  setJobAlertsOptOut: t.field({
    type: SetJobAlertsOptOutPayloadRef,
    description: 'Opts a job out of alerts (or back in). OPERATOR keys may change only jobs they created. NOT_FOUND, FORBIDDEN, RETIRED.',
    args: {
      input: t.arg({
        type: SetJobAlertsOptOutInputRef,
        required: true,
        description: 'Which job, and whether.',
        validate: setJobAlertsOptOutValidation,
      }),
    },
    resolve: (_root, args, ctx) => ctx.service.setJobAlertsOptOut(ctx.actor, args.input as never),
  }),
}));

builder.subscriptionFields((t) => ({
  alertRaised: t.field({
    type: AlertEventRef,
    description:
      "New alerts of your workspace, in order, as the evaluator raises them. Every role; the alert's rule (and so its destinations) only for ADMIN, as in `alerts`.",
    args: {
      after: t.arg.string({
        description:
          'The `cursor` of the last event you received: the stream replays what came after it, then goes live. Omit to start from now. CURSOR_EXPIRED past the retention window.',
      }),
    },
    subscribe: (_root, args, ctx) => ctx.live.alerts(ctx.actor, { after: args.after }),
    resolve: (event) => event,
  }),
}));
