/**
 * Standard Webhooks signatures: `webhook-id`, `webhook-timestamp` (unix seconds) and
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`. A secret of the form
 * `whsec_<base64>` is used as the decoded bytes, as the scheme defines; any other secret as its
 * UTF-8 bytes.
 */
import { createHmac } from 'node:crypto';

export function secretBytes(secret: string): Buffer {
  return secret.startsWith('whsec_') ? Buffer.from(secret.slice('whsec_'.length), 'base64') : Buffer.from(secret, 'utf8');
}

export function signatureHeaders(secret: string, id: string, body: string, at: Date = new Date()): Record<string, string> {
  const timestamp = Math.floor(at.getTime() / 1000).toString();
  const mac = createHmac('sha256', secretBytes(secret)).update(`${id}.${timestamp}.${body}`).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${mac}` };
}
