import {
  AlertSilenceConnectionRef,
  AlertSilenceRef,
  AlertStateConnectionRef,
  AlertStateRef,
  AlertStateStatusEnum,
} from '../schema/alert-triage.js';
import { SilenceAlertsInputRef, silenceAlertsValidation } from '../schema/alert-triage.js';
import { builder } from '../schema/builder.js';
import { pageArgs } from '../schema/common.js';

builder.queryFields((t) => ({
  alertStates: t.field({
    type: AlertStateConnectionRef,
    description:
      'What is firing now, one item per rule and subject, by rule name, then subject: by default OPEN and ACKNOWLEDGED (pass `status` for others). Every role.',
    args: {
      ...pageArgs(t.arg),
      ruleId: t.arg.id({ description: 'Only this rule.' }),
      status: t.arg({ type: [AlertStateStatusEnum], description: 'Only these statuses. Default: [OPEN, ACKNOWLEDGED].' }),
    },
    resolve: (_root, { ruleId, status, ...page }, ctx) =>
      ctx.service.alertStates(ctx.actor, { ruleId: ruleId == null ? null : String(ruleId), status }, page),
  }),
  alertState: t.field({
    type: AlertStateRef,
    description: 'One rule on one subject. NOT_FOUND when none of your workspace has this id.',
    args: { id: t.arg.id({ required: true, description: 'The alert state id.' }) },
    resolve: (_root, args, ctx) => ctx.service.alertState(ctx.actor, String(args.id)),
  }),
  alertSilences: t.field({
    type: AlertSilenceConnectionRef,
    description: 'Silences of the workspace, newest first. Every role.',
    args: {
      ...pageArgs(t.arg),
      ruleId: t.arg.id({ description: 'Only silences of this rule.' }),
      activeOnly: t.arg.boolean({ description: 'Only those in force now. Default false.' }),
    },
    resolve: (_root, { ruleId, activeOnly, ...page }, ctx) =>
      ctx.service.alertSilences(ctx.actor, { ruleId: ruleId == null ? null : String(ruleId), activeOnly }, page),
  }),
}));

builder.mutationFields((t) => ({
  acknowledgeAlertState: t.field({
    type: AlertStateRef,
    description:
      'Acknowledges what is firing for one rule and subject: says who is on it. It lasts for the episode (until the condition resolves; the next firing is OPEN again) and changes no delivery (silenceAlerts does). Acknowledging again keeps the first acknowledgement. OPERATOR or ADMIN: whoever is on call (editing the rules stays ADMIN). NOT_FOUND; CONFLICT with reason NOT_FIRING when it has resolved.',
    args: { id: t.arg.id({ required: true, description: 'The alert state id.' }) },
    resolve: (_root, args, ctx) => ctx.service.acknowledgeAlertState(ctx.actor, String(args.id)),
  }),
  silenceAlerts: t.field({
    type: AlertSilenceRef,
    description:
      "Silences a rule, or one subject of it, from now for durationMs: its notifications are still recorded (marked silenced) and not delivered; it expires on its own. OPERATOR or ADMIN: whoever is on call (editing the rules stays ADMIN). VALIDATION_FAILED (reason SILENCE_DURATION for a duration out of bounds), NOT_FOUND (the rule, or the subject's job).",
    args: {
      input: t.arg({
        type: SilenceAlertsInputRef,
        required: true,
        description: 'What to silence, and how long.',
        validate: silenceAlertsValidation,
      }),
    },
    resolve: (_root, args, ctx) => ctx.service.silenceAlerts(ctx.actor, args.input as never),
  }),
  unsilenceAlerts: t.field({
    type: AlertSilenceRef,
    description:
      'Lifts a silence now: notifications from now on are delivered. One that already ended is answered as it is. OPERATOR or ADMIN. NOT_FOUND.',
    args: { id: t.arg.id({ required: true, description: 'The silence id.' }) },
    resolve: (_root, args, ctx) => ctx.service.unsilenceAlerts(ctx.actor, String(args.id)),
  }),
}));
