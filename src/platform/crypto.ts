import crypto from 'node:crypto';

/**
 * Small wrappers over node:crypto. Secrets at rest are sealed with AES-256-GCM under the master key;
 * comparisons of secrets are constant time with the length checked first.
 */
export function sha256Hex(data: string | Uint8Array): string {
  return crypto.createHash('sha256').update(data).digest('hex');
}

export function hmacSha256Hex(key: string | Uint8Array, data: string | Uint8Array): string {
  return crypto.createHmac('sha256', key).update(data).digest('hex');
}

/** Constant-time equality for two strings of hex or ASCII; unequal lengths return false at once. */
export function constantTimeEqual(left: string, right: string): boolean {
  const leftBytes = Buffer.from(left, 'utf8');
  const rightBytes = Buffer.from(right, 'utf8');
  if (leftBytes.length !== rightBytes.length) return false;
  return crypto.timingSafeEqual(leftBytes, rightBytes);
}

/** URL-safe random text with `bytes` bytes of entropy. */
export function randomToken(bytes: number): string {
  return crypto.randomBytes(bytes).toString('base64url');
}

const SEALED_VERSION = 'v1';

/**
 * Seals secrets at rest. The output is `v1.<iv>.<tag>.<ciphertext>` in base64url, with the purpose
 * bound as additional authenticated data so a sealed value cannot be moved to another column.
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(masterKey: Buffer) {
    if (masterKey.length !== 32) throw new Error('the master key must be exactly 32 bytes');
    this.key = masterKey;
  }

  static fromBase64(text: string): SecretBox {
    return new SecretBox(Buffer.from(text, 'base64'));
  }

  seal(plaintext: string, purpose: string): string {
    const iv = crypto.randomBytes(12);
    const cipher = crypto.createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(purpose, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return [SEALED_VERSION, iv.toString('base64url'), tag.toString('base64url'), ciphertext.toString('base64url')].join('.');
  }

  open(sealed: string, purpose: string): string {
    const parts = sealed.split('.');
    if (parts.length !== 4 || parts[0] !== SEALED_VERSION) throw new Error('sealed value has an unknown format');
    const [, ivText, tagText, ciphertextText] = parts as [string, string, string, string];
    const decipher = crypto.createDecipheriv('aes-256-gcm', this.key, Buffer.from(ivText, 'base64url'));
    decipher.setAAD(Buffer.from(purpose, 'utf8'));
    decipher.setAuthTag(Buffer.from(tagText, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ciphertextText, 'base64url')), decipher.final()]).toString('utf8');
  }
}
