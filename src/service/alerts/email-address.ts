/**
 * The one email address grammar jobgate accepts: a plain `local@host.name`, nothing else.
 *
 * An address is handed to a mailer, and a mailer's parser reads far more than an address into a
 * string: a display name and `<...>`, a comment `(...)`, a group `name:a@x,b@y;`, a quoted local
 * part, an IP literal `[127.0.0.1]`, several addresses separated by commas, source routes
 * (`a%b@relay`, `host!user`). Each can send mail somewhere the rule does not say, or to a host the
 * address hides. So the grammar is a conservative subset of RFC 5321's: ASCII only, a dot-atom
 * local part of letters, digits and `_ ' + -`, and a domain that is a host name (labels of letters,
 * digits and inner hyphens, the last one not all digits, so not an IPv4 address either).
 * Internationalised addresses are refused: a mailer would convert them (Punycode, SMTPUTF8), and
 * an `xn--` domain is accepted as it is.
 */
const LOCAL_PART = /^[A-Za-z0-9_'+-]+(?:\.[A-Za-z0-9_'+-]+)*$/;
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

/** The longest address SMTP carries in a path (RFC 5321 §4.5.3.1.3, less the angle brackets). */
export const MAX_EMAIL_ADDRESS_LENGTH = 254;

export const PLAIN_EMAIL_ADDRESS_MESSAGE =
  'is not a plain email address: local@host.name only (no display name, comment, group, quotes, IP literal, space or second address)';

/** Whether `value`, as it is (not trimmed), is a plain address of the grammar above. */
export function isPlainEmailAddress(value: string): boolean {
  if (value.length > MAX_EMAIL_ADDRESS_LENGTH) return false;
  const at = value.indexOf('@');
  if (at <= 0 || at !== value.lastIndexOf('@')) return false;
  const local = value.slice(0, at);
  const domain = value.slice(at + 1);
  if (local.length > 64 || !LOCAL_PART.test(local) || domain.length > 253) return false;
  const labels = domain.split('.');
  return labels.every((l) => LABEL.test(l)) && /[A-Za-z]/.test(labels[labels.length - 1]!);
}
