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

/** Sealed before keys had identifiers: `v1.<iv>.<tag>.<ciphertext>`, opened by trying each key of the ring. */
const LEGACY_SEALED_VERSION = 'v1';
/** `v2.<key id>.<iv>.<tag>.<ciphertext>`: the key id names the master key that sealed the value. */
const SEALED_VERSION = 'v2';
const KEY_ID_BYTES = 8;

/** The master key's identifier: the first 8 bytes of its SHA-256, in base64url. It reveals nothing usable of the key. */
export function masterKeyId(key: Buffer): string {
  return crypto.createHash('sha256').update(key).digest().subarray(0, KEY_ID_BYTES).toString('base64url');
}

/**
 * The master keys a process holds: `current` seals every new value, `previous` (MASTER_KEY_PREVIOUS) only
 * opens values sealed before a rotation finished (docs/decisions/master-key-rotation.md).
 */
export interface MasterKeyring {
  current: Buffer;
  previous: readonly Buffer[];
}

/** A sealed value names a key this process does not hold: MASTER_KEY and MASTER_KEY_PREVIOUS miss it. */
export class UnknownMasterKey extends Error {
  constructor(readonly key_id: string) {
    super(`a value is sealed under master key ${key_id}, which is neither MASTER_KEY nor in MASTER_KEY_PREVIOUS`);
    this.name = 'UnknownMasterKey';
  }
}

/** The ring's keys by identifier, current first; refuses a key that is not 32 bytes or is named twice. */
export function keysById(ring: MasterKeyring): Map<string, Buffer> {
  const keys = new Map<string, Buffer>();
  for (const key of [ring.current, ...ring.previous]) {
    if (key.length !== 32) throw new Error('every master key must be exactly 32 bytes');
    const id = masterKeyId(key);
    if (keys.has(id)) throw new Error(`master key ${id} is given twice (MASTER_KEY_PREVIOUS repeats a key)`);
    keys.set(id, key);
  }
  return keys;
}

function sealWith(key: Buffer, plaintext: string, purpose: string): { iv: Buffer; tag: Buffer; ciphertext: Buffer } {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(purpose, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return { iv, tag: cipher.getAuthTag(), ciphertext };
}

function openWith(key: Buffer, parts: readonly [string, string, string], purpose: string): string {
  const [ivText, tagText, ciphertextText] = parts;
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, Buffer.from(ivText, 'base64url'));
  decipher.setAAD(Buffer.from(purpose, 'utf8'));
  decipher.setAuthTag(Buffer.from(tagText, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ciphertextText, 'base64url')), decipher.final()]).toString('utf8');
}

/**
 * Seals secrets at rest. The output is `v2.<key id>.<iv>.<tag>.<ciphertext>` in base64url, with the purpose
 * bound as additional authenticated data so a sealed value cannot be moved to another column. Values of
 * the older `v1` format (no key id) still open, under whichever key of the ring opens them.
 */
export class SecretBox {
  private readonly keys: Map<string, Buffer>;
  readonly current_key_id: string;

  constructor(current: Buffer, previous: readonly Buffer[] = []) {
    if (current.length !== 32) throw new Error('the master key must be exactly 32 bytes');
    this.keys = keysById({ current, previous });
    this.current_key_id = masterKeyId(current);
  }

  static fromBase64(text: string): SecretBox {
    return new SecretBox(Buffer.from(text, 'base64'));
  }

  static fromKeyring(ring: MasterKeyring): SecretBox {
    return new SecretBox(ring.current, ring.previous);
  }

  /** True when `text` is in a sealed format (either version), as opposed to a value stored in clear. */
  static isSealed(text: string): boolean {
    return text.startsWith(`${SEALED_VERSION}.`) || text.startsWith(`${LEGACY_SEALED_VERSION}.`);
  }

  seal(plaintext: string, purpose: string): string {
    const { iv, tag, ciphertext } = sealWith(this.keys.get(this.current_key_id)!, plaintext, purpose);
    return [SEALED_VERSION, this.current_key_id, iv.toString('base64url'), tag.toString('base64url'), ciphertext.toString('base64url')].join('.');
  }

  /** True when `sealed` is sealed under the current key already (rotation leaves it as it is). */
  isUnderCurrentKey(sealed: string): boolean {
    return sealed.startsWith(`${SEALED_VERSION}.${this.current_key_id}.`);
  }

  /** The same plaintext sealed under the current key; throws as `open` does. */
  reseal(sealed: string, purpose: string): string {
    return this.seal(this.open(sealed, purpose), purpose);
  }

  open(sealed: string, purpose: string): string {
    const parts = sealed.split('.');
    if (parts.length === 5 && parts[0] === SEALED_VERSION) {
      const key = this.keys.get(parts[1]!);
      if (key === undefined) throw new UnknownMasterKey(parts[1]!);
      return openWith(key, parts.slice(2) as [string, string, string], purpose);
    }
    if (parts.length !== 4 || parts[0] !== LEGACY_SEALED_VERSION) throw new Error('sealed value has an unknown format');
    return this.openLegacy(parts.slice(1) as [string, string, string], purpose);
  }

  /** A v1 value names no key: each key of the ring is tried, and GCM's tag tells the right one. */
  private openLegacy(parts: readonly [string, string, string], purpose: string): string {
    for (const key of this.keys.values()) {
      try {
        return openWith(key, parts, purpose);
      } catch {
        // Not this key (or not this purpose): the next key is tried; none opening is reported below.
      }
    }
    throw new Error('a v1 sealed value opens under no master key held (MASTER_KEY, MASTER_KEY_PREVIOUS) for its purpose');
  }
}
