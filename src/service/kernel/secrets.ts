/**
 * Secrets at rest: endpoint signing secrets and secret config values are stored encrypted with
 * AES-256-GCM under a key from configuration (JOBGATE_SECRET_KEY; the embedded default keeps a
 * generated one in its data folder). API keys are not encrypted but hashed: they are never
 * needed back.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const PREFIX = 'enc:v1:';

export class SecretBox {
  private readonly key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('the secret key must be 32 bytes');
    this.key = key;
  }

  /** Parses JOBGATE_SECRET_KEY: 32 bytes, base64 or hex. */
  static fromText(text: string): SecretBox {
    const raw = /^[0-9a-f]{64}$/i.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
    return new SecretBox(raw);
  }

  static generateText(): string {
    return randomBytes(32).toString('base64');
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `${PREFIX}${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
  }

  open(sealed: string): string {
    if (!sealed.startsWith(PREFIX)) throw new Error('not a sealed secret');
    const raw = Buffer.from(sealed.slice(PREFIX.length), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }
}

export const isSealed = (value: string) => value.startsWith(PREFIX);

/** API keys: `jg_<random>`, recognisable in logs and by secret scanners. */
export function newApiKey(): { key: string; prefix: string; hash: Buffer } {
  const key = `jg_${randomBytes(24).toString('base64url')}`;
  return { key, prefix: key.slice(0, 10), hash: hashApiKey(key) };
}

/** A subscription ticket (`jgt_...`) and its sha256, the only form stored. */
export function newSubscriptionTicket(): { ticket: string; hash: Buffer } {
  const ticket = `jgt_${randomBytes(24).toString('base64url')}`;
  return { ticket, hash: hashApiKey(ticket) };
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}
