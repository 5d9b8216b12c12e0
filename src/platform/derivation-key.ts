import type { Queryable } from './db.ts';
import { SecretBox, type MasterKeyring } from './crypto.ts';

/**
 * The root of the service's derived keys (migration 0038; docs/decisions/master-key-rotation.md). Every key
 * derived by HMAC from "the master key" (account lookups, checkout links and sessions, slip capability tokens,
 * QR image links) is derived from this root instead, so that rotating MASTER_KEY re-seals it and changes none
 * of the hashes kept in rows or the links already handed out.
 *
 * A database that has no root yet is given the oldest configured key (the last of MASTER_KEY_PREVIOUS, or
 * MASTER_KEY): before keys could rotate, every derived key came from the one master key, which a deployment
 * rotating for the first time names last. Opening the root is also the start's check of the key set: a set
 * that holds no key the database was sealed under fails here, before the service answers anything.
 */
const ROOT_PURPOSE = 'derivation.v1';

export const DERIVATION_TABLE = 'master_key_derivation';

export function derivationSealPurpose(purpose: string): string {
  return `${DERIVATION_TABLE}:${purpose}`;
}

/** The key set does not open the database's derivation root: the wrong MASTER_KEY, or the old one missing. */
export class MasterKeyMismatch extends Error {
  constructor(cause: unknown) {
    super(
      `MASTER_KEY and MASTER_KEY_PREVIOUS do not open this database's sealed values (${cause instanceof Error ? cause.message : 'the key root does not open'}); ` +
        'start with the key the database was sealed under as MASTER_KEY or in MASTER_KEY_PREVIOUS',
    );
    this.name = 'MasterKeyMismatch';
  }
}

export async function resolveDerivationKey(database: Queryable, ring: MasterKeyring, now: Date): Promise<Buffer> {
  const box = SecretBox.fromKeyring(ring);
  const oldest = ring.previous.at(-1) ?? ring.current;
  await database.query(
    `INSERT INTO master_key_derivation (purpose, key_sealed, created_at) VALUES ($1, $2, $3) ON CONFLICT (purpose) DO NOTHING`,
    [ROOT_PURPOSE, box.seal(oldest.toString('base64'), derivationSealPurpose(ROOT_PURPOSE)), now],
  );
  const { rows } = await database.query<{ key_sealed: string }>(`SELECT key_sealed FROM master_key_derivation WHERE purpose = $1`, [ROOT_PURPOSE]);
  try {
    const root = Buffer.from(box.open(rows[0]!.key_sealed, derivationSealPurpose(ROOT_PURPOSE)), 'base64');
    if (root.length !== 32) throw new Error('the derivation root is not 32 bytes');
    return root;
  } catch (error) {
    throw new MasterKeyMismatch(error);
  }
}
