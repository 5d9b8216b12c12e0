import type * as S3Sdk from '@aws-sdk/client-s3';
import { invariant } from '../platform/assert.ts';
import type { Queryable } from '../platform/db.ts';
import type { S3BlobStoreSettings } from '../platform/config.ts';
import type { BlobAddress, BlobStore } from './evidence-store.ts';

/**
 * The object-store adapter of the evidence blob port: one object per receipt in an S3 bucket (Amazon S3 or
 * an S3-compatible server such as MinIO, Ceph or s3rver), through `@aws-sdk/client-s3`.
 *
 * Sequencing (docs/decisions/slips.md, "Evidence in an object store"): the object is written and read back
 * before the receipt's transaction opens, so no database transaction (and none of its locks) waits on the
 * network to the bucket. A blob whose receipt then does not commit (a refusal, a replay, a failure) is
 * deleted again (`discard`). What a crash between the two leaves is an object no receipt names, sealed
 * under a data key that was never stored: ciphertext nobody can open.
 *
 * Every call has a deadline of its own (`timeout_ms`, over all its attempts) and at most `max_attempts`
 * attempts (the SDK's standard retry: exponential backoff with jitter, on throttling, 5xx and network
 * errors). Object keys are `<prefix><brand>/<receipt id>`: ids only, never a name, an account number or a
 * secret.
 */

/** Ids are prefixed ULIDs: nothing else may become part of an object key. */
const SAFE_COMPONENT = /^[A-Za-z0-9_]{1,100}$/;

/** Whether the answer says that the object is not there (NoSuchKey from GET, a bare 404 from some servers). */
function isMissing(error: unknown): boolean {
  const answer = error as { name?: unknown; $metadata?: { httpStatusCode?: unknown } } | null;
  return answer?.name === 'NoSuchKey' || answer?.$metadata?.httpStatusCode === 404;
}

type S3Module = typeof S3Sdk;
type S3Client = S3Sdk.S3Client;

export class S3BlobStore implements BlobStore {
  readonly kind = 's3' as const;
  readonly writes = 'before_transaction' as const;
  /**
   * The SDK, loaded at the first call: it is about a second and 25 MiB to load, which a deployment that keeps
   * its evidence elsewhere should not pay at every start.
   */
  private connection: Promise<{ sdk: S3Module; client: S3Client }> | null = null;

  constructor(private readonly settings: S3BlobStoreSettings) {}

  private connect(): Promise<{ sdk: S3Module; client: S3Client }> {
    this.connection ??= import('@aws-sdk/client-s3').then((sdk) => ({ sdk, client: this.clientOf(sdk) }));
    return this.connection;
  }

  private clientOf(sdk: S3Module): S3Client {
    const settings = this.settings;
    return new sdk.S3Client({
      region: settings.region,
      ...(settings.endpoint === null ? {} : { endpoint: settings.endpoint }),
      forcePathStyle: settings.force_path_style,
      ...(settings.credentials === null
        ? {}
        : { credentials: { accessKeyId: settings.credentials.access_key_id, secretAccessKey: settings.credentials.secret_access_key } }),
      maxAttempts: settings.max_attempts,
      // One attempt may not take the whole deadline on a connection that never answers.
      requestHandler: { connectionTimeout: Math.min(settings.timeout_ms, 3_000), requestTimeout: settings.timeout_ms },
    });
  }

  private keyOf(address: BlobAddress): string {
    invariant(SAFE_COMPONENT.test(address.white_label_id) && SAFE_COMPONENT.test(address.blob_key), 'blob addresses are ids');
    return `${this.settings.prefix}${address.white_label_id}/${address.blob_key}`;
  }

  /** The options of one call: its deadline over every attempt. */
  private callOptions() {
    return { abortSignal: AbortSignal.timeout(this.settings.timeout_ms) };
  }

  async put(_db: Queryable, address: BlobAddress, bytes: Buffer): Promise<void> {
    const { sdk, client } = await this.connect();
    await client.send(
      new sdk.PutObjectCommand({
        Bucket: this.settings.bucket,
        Key: this.keyOf(address),
        Body: bytes,
        ContentLength: bytes.length,
        ContentType: 'application/octet-stream',
      }),
      this.callOptions(),
    );
  }

  async get(_db: Queryable, address: BlobAddress): Promise<Buffer | null> {
    const { sdk, client } = await this.connect();
    try {
      const answer = await client.send(new sdk.GetObjectCommand({ Bucket: this.settings.bucket, Key: this.keyOf(address) }), this.callOptions());
      if (answer.Body === undefined) return null;
      return Buffer.from(await answer.Body.transformToByteArray());
    } catch (error) {
      if (isMissing(error)) return null;
      throw error;
    }
  }

  /** Reads the object back whole: a store's own checksum would prove what it received, not what it serves. */
  async storedExactly(db: Queryable, address: BlobAddress, bytes: Buffer): Promise<boolean> {
    const stored = await this.get(db, address);
    return stored !== null && stored.equals(bytes);
  }

  async discard(address: BlobAddress): Promise<void> {
    await this.deleteObject(address);
  }

  async remove(address: BlobAddress): Promise<void> {
    await this.deleteObject(address);
  }

  /** Deleting an object that is not there succeeds (S3's DELETE is idempotent), so a retried purge is safe. */
  private async deleteObject(address: BlobAddress): Promise<void> {
    const { sdk, client } = await this.connect();
    await client.send(new sdk.DeleteObjectCommand({ Bucket: this.settings.bucket, Key: this.keyOf(address) }), this.callOptions());
  }

  close(): void {
    void this.connection?.then(({ client }) => client.destroy());
  }
}
