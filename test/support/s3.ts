import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';

/**
 * A local S3-compatible server (s3rver) on a free port, over a temporary directory, with one bucket: the
 * object store the S3 evidence adapter is tested against. `config` is what the service needs to use it.
 */
export interface LocalS3 {
  bucket: string;
  endpoint: string;
  config: Record<string, string>;
  /** Every key in the bucket, sorted. */
  keys(): Promise<string[]>;
  /** An object's bytes, or null when there is none. */
  object(key: string): Promise<Buffer | null>;
  close(): Promise<void>;
}

/** s3rver accepts any well-formed signature; these are what the service signs with. */
const CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

export async function startLocalS3(bucket = 'slip-evidence', prefix = 'slips/'): Promise<LocalS3> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 's3rver-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: CREDENTIALS });
  return {
    bucket,
    endpoint,
    config: {
      SLIP_EVIDENCE_STORE: 's3',
      SLIP_EVIDENCE_S3_BUCKET: bucket,
      SLIP_EVIDENCE_S3_PREFIX: prefix,
      SLIP_EVIDENCE_S3_ENDPOINT: endpoint,
      SLIP_EVIDENCE_S3_REGION: 'us-east-1',
      SLIP_EVIDENCE_S3_FORCE_PATH_STYLE: 'true',
      SLIP_EVIDENCE_S3_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
      SLIP_EVIDENCE_S3_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
    },
    async keys() {
      const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
      return (listed.Contents ?? []).map((entry) => entry.Key ?? '').sort();
    },
    async object(key: string) {
      try {
        const answer = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
        return Buffer.from(await answer.Body!.transformToByteArray());
      } catch (error) {
        if ((error as { name?: string }).name === 'NoSuchKey') return null;
        throw error;
      }
    },
    async close() {
      client.destroy();
      await server.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** A port nothing listens on (bound, read, closed): an object store that is down. */
export async function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
