import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { hmacSha256Hex, keysById, masterKeyId, sha256Hex, UnknownMasterKey } from '../platform/crypto.ts';
import * as repository from './repository.ts';

/**
 * Slip evidence at rest (DESIGN.md, "Slip evidence"): envelope encryption and a blob-store port.
 *
 * Each image is encrypted with AES-256-GCM under a data key of its own (random, 32 bytes). The data
 * key is wrapped with AES-256-GCM under the evidence key, which is derived from the master key with
 * HMAC-SHA256 over a fixed purpose, so that the master key itself never encrypts data and rotating it
 * rotates the evidence key. Both layers bind the brand and the receipt id as additional authenticated
 * data: a blob or a wrapped key moved to another receipt does not open.
 *
 * The ciphertext goes to a blob store: PostgreSQL (default, written in the receipt's own transaction,
 * so a receipt and its blob commit together), a filesystem directory, or an S3 object store
 * (src/slips/s3-blob-store.ts). The last two write and read back the blob before the receipt's
 * transaction opens, so that no transaction waits on a disk or a network; a blob whose receipt then does
 * not commit is discarded.
 */

const EVIDENCE_KEY_PURPOSE = 'slips.evidence.key.v1';
/** `v1.<wrapped>`: wrapped before keys had identifiers, unwrapped by trying each evidence key. */
const LEGACY_WRAPPED_KEY_VERSION = 'v1';
/** `v2.<master key id>.<wrapped>`: the id names the master key the evidence key was derived from. */
const WRAPPED_KEY_VERSION = 'v2';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const DATA_KEY_BYTES = 32;

export interface BlobAddress {
  white_label_id: string;
  /** The receipt id the blob belongs to. */
  blob_key: string;
}

export type BlobStoreKind = 'postgres' | 'filesystem' | 's3';

export interface BlobStore {
  readonly kind: BlobStoreKind;
  /**
   * When an upload writes the blob: in the receipt's transaction (PostgreSQL, whose rollback removes it), or
   * before that transaction opens (a directory or an object store, so that no transaction is held open across
   * their I/O; a blob whose receipt then does not commit is discarded).
   */
  readonly writes: 'in_transaction' | 'before_transaction';
  /** Stores the bytes durably; the PostgreSQL adapter writes in `tx`, so they commit with the receipt. */
  put(tx: Queryable, address: BlobAddress, bytes: Buffer): Promise<void>;
  /** The stored bytes, or null when there are none. */
  get(db: Queryable, address: BlobAddress): Promise<Buffer | null>;
  /**
   * Reads back what `put` stored and says whether it is exactly `bytes`. The PostgreSQL store compares
   * length and SHA-256 in the database, so the blob does not cross the wire a second time.
   */
  storedExactly(db: Queryable, address: BlobAddress, bytes: Buffer): Promise<boolean>;
  /** Removes a blob whose receipt did not commit (a no-op where the transaction's rollback did it). */
  discard(address: BlobAddress): Promise<void>;
  /**
   * Deletes a blob for the evidence retention, after the purge's transaction has committed; idempotent (a blob
   * already gone is not an error). A no-op for PostgreSQL, whose blobs the purge's transaction itself deletes.
   */
  remove(address: BlobAddress): Promise<void>;
  /** Lets go of connections at the instance's stop (the object store's). */
  close?(): void;
}

export interface SealedEvidence {
  /** iv ‖ tag ‖ ciphertext of the image. */
  ciphertext: Buffer;
  /** The data key, wrapped: `v2.<master key id>.<iv ‖ tag ‖ wrapped key in base64url>` (older ones `v1.<…>`). */
  wrapped_key: string;
}

function associatedData(address: BlobAddress): Buffer {
  return Buffer.from(`${address.white_label_id}:${address.blob_key}`, 'utf8');
}

/**
 * GCM is a stream mode: each slice of plaintext gives as many bytes of ciphertext. Working in slices of
 * this size writes the ciphertext straight into the one buffer that is stored, instead of making a whole
 * copy of the image per step (the update's output, then its concatenation with the tag and iv).
 */
const CIPHER_SLICE_BYTES = 64 * 1024;

/** iv ‖ tag ‖ ciphertext, written into one buffer of exactly that size. */
function encrypt(key: Buffer, plaintext: Buffer, aad: Buffer): Buffer {
  const iv = crypto.randomBytes(IV_BYTES);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad);
  const sealed = Buffer.allocUnsafe(IV_BYTES + TAG_BYTES + plaintext.length);
  iv.copy(sealed, 0);
  let offset = IV_BYTES + TAG_BYTES;
  for (let start = 0; start < plaintext.length; start += CIPHER_SLICE_BYTES) {
    offset += cipher.update(plaintext.subarray(start, start + CIPHER_SLICE_BYTES)).copy(sealed, offset);
  }
  offset += cipher.final().copy(sealed, offset);
  invariant(offset === sealed.length, 'GCM gives one byte of ciphertext per byte of plaintext');
  cipher.getAuthTag().copy(sealed, IV_BYTES);
  return sealed;
}

/**
 * True when `sealed` opens under `key` to exactly `expected`, compared slice by slice so that the image
 * is not decrypted into a second whole copy; false for another plaintext or a tag that does not verify.
 */
function opensTo(key: Buffer, sealed: Buffer, aad: Buffer, expected: Buffer): boolean {
  if (sealed.length !== IV_BYTES + TAG_BYTES + expected.length) return false;
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES));
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  const body = sealed.subarray(IV_BYTES + TAG_BYTES);
  let same = true;
  for (let start = 0; start < body.length; start += CIPHER_SLICE_BYTES) {
    const opened = decipher.update(body.subarray(start, start + CIPHER_SLICE_BYTES));
    same = opened.equals(expected.subarray(start, start + opened.length)) && same;
  }
  try {
    decipher.final();
  } catch {
    return false;
  }
  return same;
}

function decrypt(key: Buffer, sealed: Buffer, aad: Buffer): Buffer {
  invariant(sealed.length >= IV_BYTES + TAG_BYTES, 'sealed evidence has an iv and a tag');
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES));
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
}

export class EvidenceCipher {
  /** One evidence key per master key of the ring, by the master key's id; the current one first. */
  private readonly evidenceKeys: Map<string, Buffer>;
  readonly current_key_id: string;

  constructor(master_key: Buffer, previous_master_keys: readonly Buffer[] = []) {
    invariant(master_key.length === 32, 'the master key is 32 bytes');
    this.evidenceKeys = new Map();
    for (const [id, key] of keysById({ current: master_key, previous: previous_master_keys })) {
      this.evidenceKeys.set(id, Buffer.from(hmacSha256Hex(key, EVIDENCE_KEY_PURPOSE), 'hex'));
    }
    this.current_key_id = masterKeyId(master_key);
  }

  seal(address: BlobAddress, plaintext: Buffer): SealedEvidence {
    const aad = associatedData(address);
    const dataKey = crypto.randomBytes(DATA_KEY_BYTES);
    const ciphertext = encrypt(dataKey, plaintext, aad);
    const wrapped_key = this.wrap(dataKey, aad);
    dataKey.fill(0);
    return { ciphertext, wrapped_key };
  }

  /** True when the wrapped key is wrapped under the current master key's evidence key already. */
  isUnderCurrentKey(wrapped_key: string): boolean {
    return wrapped_key.startsWith(`${WRAPPED_KEY_VERSION}.${this.current_key_id}.`);
  }

  /**
   * The same data key wrapped under the current master key's evidence key (key rotation): the image's
   * ciphertext does not change, so rotation never reads or rewrites an image.
   */
  rewrap(address: BlobAddress, wrapped_key: string): string {
    const aad = associatedData(address);
    const dataKey = this.unwrap(wrapped_key, aad);
    try {
      return this.wrap(dataKey, aad);
    } finally {
      dataKey.fill(0);
    }
  }

  /**
   * True when sealed evidence opens, with its wrapped key, to exactly `expected` (the read-back before an
   * upload's 202), without holding a second copy of the image.
   */
  opensTo(address: BlobAddress, sealed: SealedEvidence, expected: Buffer): boolean {
    return this.withDataKey(address, sealed, (dataKey, aad) => opensTo(dataKey, sealed.ciphertext, aad, expected));
  }

  /** Opens sealed evidence; throws when it was altered, moved to another receipt, or sealed under another key. */
  open(address: BlobAddress, sealed: SealedEvidence): Buffer {
    return this.withDataKey(address, sealed, (dataKey, aad) => decrypt(dataKey, sealed.ciphertext, aad));
  }

  private wrap(dataKey: Buffer, aad: Buffer): string {
    const wrapped = encrypt(this.evidenceKeys.get(this.current_key_id)!, dataKey, aad);
    return `${WRAPPED_KEY_VERSION}.${this.current_key_id}.${wrapped.toString('base64url')}`;
  }

  /** The data key; a v2 key names its master key, a v1 key is tried under each evidence key in turn. */
  private unwrap(wrapped_key: string, aad: Buffer): Buffer {
    const parts = wrapped_key.split('.');
    if (parts.length === 3 && parts[0] === WRAPPED_KEY_VERSION) {
      const evidenceKey = this.evidenceKeys.get(parts[1]!);
      if (evidenceKey === undefined) throw new UnknownMasterKey(parts[1]!);
      return decrypt(evidenceKey, Buffer.from(parts[2]!, 'base64url'), aad);
    }
    invariant(parts.length === 2 && parts[0] === LEGACY_WRAPPED_KEY_VERSION, 'a wrapped key of a known version');
    for (const evidenceKey of this.evidenceKeys.values()) {
      try {
        return decrypt(evidenceKey, Buffer.from(parts[1]!, 'base64url'), aad);
      } catch {
        // Not this evidence key: the next one is tried; none opening is reported below.
      }
    }
    throw new Error('a v1 wrapped evidence key opens under no master key held (MASTER_KEY, MASTER_KEY_PREVIOUS)');
  }

  /** Unwraps the evidence's data key for `work`, and wipes it afterwards. */
  private withDataKey<T>(address: BlobAddress, sealed: SealedEvidence, work: (dataKey: Buffer, aad: Buffer) => T): T {
    const aad = associatedData(address);
    const dataKey = this.unwrap(sealed.wrapped_key, aad);
    try {
      return work(dataKey, aad);
    } finally {
      dataKey.fill(0);
    }
  }
}

/** The default blob store: the `slip_blobs` table, in the caller's transaction. */
export class PostgresBlobStore implements BlobStore {
  readonly kind = 'postgres' as const;
  readonly writes = 'in_transaction' as const;

  async put(tx: Queryable, address: BlobAddress, bytes: Buffer): Promise<void> {
    await repository.insertBlob(tx, address, bytes);
  }

  get(db: Queryable, address: BlobAddress): Promise<Buffer | null> {
    return repository.findBlob(db, address);
  }

  storedExactly(db: Queryable, address: BlobAddress, bytes: Buffer): Promise<boolean> {
    return repository.blobMatches(db, address, bytes.length, sha256Hex(bytes));
  }

  async discard(): Promise<void> {
    // The blob was written in the receipt's transaction, so its rollback removed it.
  }

  async remove(): Promise<void> {
    // The purge's transaction deleted the row with the receipt's mark (repository.markEvidencePurged).
  }
}

/** Ids are prefixed ULIDs: nothing else may become a path component. */
const SAFE_COMPONENT = /^[A-Za-z0-9_]{1,100}$/;

/**
 * The filesystem blob store: one file per blob under `<directory>/<brand>/`. A blob is written to a
 * temporary name, synced, renamed into place and its directory synced, so that once `put` returns the
 * bytes survive a crash of the machine, not only of the process. Written before the receipt's
 * transaction opens, so no transaction waits on the disk's syncs.
 */
export class FilesystemBlobStore implements BlobStore {
  readonly kind = 'filesystem' as const;
  readonly writes = 'before_transaction' as const;

  constructor(private readonly directory: string) {}

  private pathOf(address: BlobAddress): string {
    invariant(SAFE_COMPONENT.test(address.white_label_id) && SAFE_COMPONENT.test(address.blob_key), 'blob addresses are ids');
    return path.join(path.resolve(this.directory), address.white_label_id, `${address.blob_key}.blob`);
  }

  async put(_tx: Queryable, address: BlobAddress, bytes: Buffer): Promise<void> {
    const target = this.pathOf(address);
    const folder = path.dirname(target);
    await fs.mkdir(folder, { recursive: true, mode: 0o700 });
    const temporary = `${target}.${crypto.randomBytes(6).toString('hex')}.tmp`;
    const handle = await fs.open(temporary, 'wx', 0o600);
    try {
      await handle.writeFile(bytes);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(temporary, target);
    const folderHandle = await fs.open(folder, 'r');
    try {
      await folderHandle.sync();
    } finally {
      await folderHandle.close();
    }
  }

  async get(_db: Queryable, address: BlobAddress): Promise<Buffer | null> {
    try {
      return await fs.readFile(this.pathOf(address));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  async storedExactly(_db: Queryable, address: BlobAddress, bytes: Buffer): Promise<boolean> {
    const stored = await this.get(_db, address);
    return stored !== null && stored.equals(bytes);
  }

  async discard(address: BlobAddress): Promise<void> {
    await fs.rm(this.pathOf(address), { force: true });
  }

  async remove(address: BlobAddress): Promise<void> {
    await fs.rm(this.pathOf(address), { force: true });
  }
}
