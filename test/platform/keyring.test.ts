import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { masterKeyId, SecretBox, UnknownMasterKey } from '../../src/platform/crypto.ts';
import { EvidenceCipher } from '../../src/slips/evidence-store.ts';

/**
 * The master key ring (docs/decisions/master-key-rotation.md): values name the key that sealed them, the current
 * key seals, earlier keys only open, and a value under a key the ring lacks fails with the key's id and nothing else.
 */
const OLD = Buffer.alloc(32, 1);
const NEW = Buffer.alloc(32, 2);
const OTHER = Buffer.alloc(32, 3);

/** A v1 value as the service sealed it before key ids: `v1.<iv>.<tag>.<ciphertext>`. */
function legacySeal(key: Buffer, plaintext: string, purpose: string): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(purpose, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join('.');
}

describe('SecretBox with a key ring', () => {
  it('seals as v2 under the current key id and opens with the same purpose only', () => {
    const box = new SecretBox(NEW, [OLD]);
    const sealed = box.seal('secret-text', 'purpose.a');
    expect(sealed.startsWith(`v2.${masterKeyId(NEW)}.`)).toBe(true);
    expect(sealed).not.toContain('secret-text');
    expect(box.isUnderCurrentKey(sealed)).toBe(true);
    expect(box.open(sealed, 'purpose.a')).toBe('secret-text');
    expect(() => box.open(sealed, 'purpose.b')).toThrow();
  });

  it('opens a value sealed under a previous key, and reseals it under the current one', () => {
    const sealedOld = new SecretBox(OLD).seal('account 1234567890', 'p');
    const ring = new SecretBox(NEW, [OTHER, OLD]);
    expect(ring.isUnderCurrentKey(sealedOld)).toBe(false);
    expect(ring.open(sealedOld, 'p')).toBe('account 1234567890');
    const resealed = ring.reseal(sealedOld, 'p');
    expect(ring.isUnderCurrentKey(resealed)).toBe(true);
    expect(new SecretBox(NEW).open(resealed, 'p')).toBe('account 1234567890');
  });

  it('opens legacy v1 values under whichever key of the ring sealed them', () => {
    const legacy = legacySeal(OLD, 'legacy', 'p');
    expect(new SecretBox(OLD).open(legacy, 'p')).toBe('legacy');
    expect(new SecretBox(NEW, [OLD]).open(legacy, 'p')).toBe('legacy');
    expect(new SecretBox(NEW, [OLD]).isUnderCurrentKey(legacy)).toBe(false);
    expect(() => new SecretBox(NEW).open(legacy, 'p')).toThrow(/opens under no master key held/);
  });

  it('refuses a value under a key the ring lacks, naming only the key id', () => {
    const sealed = new SecretBox(OTHER).seal('do-not-print', 'p');
    let caught: unknown = null;
    try {
      new SecretBox(NEW, [OLD]).open(sealed, 'p');
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(UnknownMasterKey);
    const message = (caught as Error).message;
    expect(message).toContain(masterKeyId(OTHER));
    expect(message).toMatch(/neither MASTER_KEY nor in MASTER_KEY_PREVIOUS/);
    expect(message).not.toContain('do-not-print');
    expect(message).not.toContain(OTHER.toString('base64'));
  });

  it('refuses a key given twice and a key of the wrong length', () => {
    expect(() => new SecretBox(NEW, [NEW])).toThrow(/given twice/);
    expect(() => new SecretBox(NEW, [Buffer.alloc(16, 1)])).toThrow(/32 bytes/);
  });

  it('names keys by 8 bytes of SHA-256, the same id for the same key and different ids for different keys', () => {
    expect(masterKeyId(NEW)).toBe(crypto.createHash('sha256').update(NEW).digest().subarray(0, 8).toString('base64url'));
    expect(masterKeyId(NEW)).not.toBe(masterKeyId(OLD));
  });
});

describe('EvidenceCipher with a key ring', () => {
  const address = { white_label_id: 'wl_a', blob_key: 'rcpt_1' };
  const image = crypto.randomBytes(200_000);

  it('rewraps the data key under the current key without changing the image ciphertext', () => {
    const sealed = new EvidenceCipher(OLD).seal(address, image);
    const ring = new EvidenceCipher(NEW, [OLD]);
    expect(ring.isUnderCurrentKey(sealed.wrapped_key)).toBe(false);
    expect(ring.open(address, sealed).equals(image)).toBe(true);
    const wrapped_key = ring.rewrap(address, sealed.wrapped_key);
    expect(ring.isUnderCurrentKey(wrapped_key)).toBe(true);
    expect(new EvidenceCipher(NEW).open(address, { ciphertext: sealed.ciphertext, wrapped_key }).equals(image)).toBe(true);
    expect(() => new EvidenceCipher(NEW).open(address, sealed)).toThrow(UnknownMasterKey);
  });

  it('opens and rewraps a legacy v1 wrapped key (wrapped before key ids) under the current key', () => {
    const aad = Buffer.from(`${address.white_label_id}:${address.blob_key}`, 'utf8');
    const gcm = (key: Buffer, plaintext: Buffer) => {
      const iv = crypto.randomBytes(12);
      const cipher = crypto.createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(aad);
      const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), body]);
    };
    const dataKey = crypto.randomBytes(32);
    const evidenceKey = crypto.createHmac('sha256', OLD).update('slips.evidence.key.v1').digest();
    const legacy = { ciphertext: gcm(dataKey, image), wrapped_key: `v1.${gcm(evidenceKey, dataKey).toString('base64url')}` };
    const ring = new EvidenceCipher(NEW, [OLD]);
    expect(ring.open(address, legacy).equals(image)).toBe(true);
    const wrapped_key = ring.rewrap(address, legacy.wrapped_key);
    expect(new EvidenceCipher(NEW).open(address, { ciphertext: legacy.ciphertext, wrapped_key }).equals(image)).toBe(true);
  });

  it('binds the rewrapped key to its receipt', () => {
    const sealed = new EvidenceCipher(OLD).seal(address, image);
    const wrapped_key = new EvidenceCipher(NEW, [OLD]).rewrap(address, sealed.wrapped_key);
    expect(() => new EvidenceCipher(NEW).open({ ...address, blob_key: 'rcpt_2' }, { ciphertext: sealed.ciphertext, wrapped_key })).toThrow();
  });
});
