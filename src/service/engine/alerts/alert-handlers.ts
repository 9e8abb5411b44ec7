/**
 * jobgate's two alert handlers, registered beside the reaper in every worker process so that
 * they show in the handler catalogue: `jobgate.alerts` (the evaluator, ./evaluator.ts) and
 * `jobgate.alert-email` (sends one notification by SMTP with nodemailer).
 *
 * Recipients: the rule's `emailTo` (read when sending: a job's input is readable by every key of
 * the workspace, a rule's addresses by ADMIN only), else the installation's default list
 * (JOBGATE_ALERT_EMAIL_TO).
 * API keys carry no email address, so "the workspace's admins" cannot be looked up; the default
 * list is where an installation names them.
 */
import nodemailer from 'nodemailer';
import type pg from 'pg';
import { z } from 'zod';
import { alertEmailRecipients } from '../../../db/statements/alert-notify.js';
import { isPlainEmailAddress } from '../../alerts/email-address.js';
import { evaluateAlerts, ALERT_EMAIL_HANDLER, ALERTS_HANDLER } from './evaluator.js';
import { UnrecoverableError, type HandlerFn, type HandlerRegistry } from '../delivery/handler-registry.js';

export interface AlertEmailOptions {
  /** smtp:// or smtps:// URL of the mail server (JOBGATE_SMTP_URL); without it email cannot be sent. */
  smtpUrl?: string | undefined;
  /** The From address (JOBGATE_SMTP_FROM). */
  from?: string | undefined;
  /** Recipients when a rule names none (JOBGATE_ALERT_EMAIL_TO). */
  defaultTo?: string[] | undefined;
  /**
   * The gateway's public address, e.g. `https://jobs.example.com` (JOBGATE_PUBLIC_URL): each
   * notification's email (and JSON webhook, as `consoleUrl`) links to the alert in its console.
   * No link without it.
   */
  publicUrl?: string | undefined;
}

const emailJobInput = z.object({
  // The rule whose recipients to read when sending. (Jobs queued before recipients left the
  // input carry `to` instead.)
  ruleId: z.uuid().optional(),
  to: z.array(z.string()).max(50).optional(),
  subject: z.string().max(1000),
  text: z.string().max(100_000),
  alertId: z.string(),
});

/** Email addresses in an SMTP error (a refused recipient is named in it), masked. */
const ADDRESS = /[^\s@<>,;:"'()[\]]+@[^\s@<>,;:"'()[\]]+/g;

/**
 * Addresses are readable by ADMIN keys only (on the rule); an attempt's error is readable by
 * every key of the workspace. So what a failed send records names no address: nodemailer's
 * message with each address masked (its code and the SMTP reply are kept, which is what an
 * operator needs to see that a recipient was refused, or the server was down).
 */
export function withoutAddresses(error: unknown): Error {
  const message = error instanceof Error ? error.message : String(error);
  return new Error(message.replace(ADDRESS, '[address]'));
}

/**
 * The email sender: one message per job; a failed send is retried by the engine (SMTP errors are
 * transient more often than not). Recipients are the rule's, read when sending, else the default.
 */
export function alertEmailHandler(pool: pg.Pool, options: AlertEmailOptions): HandlerFn {
  // One transport per process: nodemailer pools nothing by default, each send opens a connection.
  const transport = options.smtpUrl ? nodemailer.createTransport(options.smtpUrl) : undefined;
  return async (raw, ctx) => {
    const input = emailJobInput.safeParse(raw);
    if (!input.success) throw new UnrecoverableError('not an alert email job input');
    const ruleTo = input.data.ruleId ? await alertEmailRecipients(pool, ctx.workspaceId, input.data.ruleId) : undefined;
    const listed = input.data.to ?? ruleTo ?? [];
    const to = listed.length > 0 ? listed : (options.defaultTo ?? []);
    if (!transport) throw new UnrecoverableError('email alerts need JOBGATE_SMTP_URL; re-drive this execution once it is set');
    if (to.length === 0) throw new UnrecoverableError("no recipients: set the rule's emailTo, or JOBGATE_ALERT_EMAIL_TO");
    // Rules are checked when written; this holds for rules written before that check, for jobs
    // queued with `to` and for the library's defaultTo. The count, not the address: see withoutAddresses.
    const refused = to.filter((a) => !isPlainEmailAddress(a)).length;
    if (refused > 0) {
      throw new UnrecoverableError(
        `${refused} recipient(s) are not plain email addresses (local@host.name): correct the rule's emailTo (or JOBGATE_ALERT_EMAIL_TO) and re-drive this execution`,
      );
    }
    if (ctx.signal.aborted) throw new Error('aborted before sending');
    try {
      await transport.sendMail({
        from: options.from ?? 'jobgate <jobgate@localhost>',
        // As address objects: nodemailer parses a string as an address list (names, groups,
        // comments); an object's address is taken as the one address it is.
        to: to.map((address) => ({ name: '', address })),
        subject: input.data.subject,
        text: input.data.text,
        // The same id on every retry: a receiving system can drop a message it already has.
        messageId: `<alert-${input.data.alertId}@jobgate>`,
        headers: { 'X-Jobgate-Alert': input.data.alertId },
      });
    } catch (error) {
      throw withoutAddresses(error);
    }
  };
}

/** Registers the evaluator and the email sender (once per registry). */
export function registerAlertHandlers(registry: HandlerRegistry, pool: pg.Pool, options: AlertEmailOptions = {}): void {
  if (registry.get(ALERTS_HANDLER)) return;
  registry.register(ALERTS_HANDLER, undefined, async (_input, ctx) => {
    await evaluateAlerts(pool, ctx.workspaceId, { publicUrl: options.publicUrl });
  });
  registry.register(ALERT_EMAIL_HANDLER, undefined, alertEmailHandler(pool, options));
}
