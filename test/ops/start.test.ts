import { spawn, execFile, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, usingPostgres, type TestDatabase } from '../support/database.ts';
import { createTestApp } from '../support/app.ts';
import { gatedControls, testWriteRoutes } from '../support/test-routes.ts';
import { signedHeaders } from '../../src/http/canonical.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..', '..');

interface Started {
  child: ChildProcessWithoutNullStreams;
  output: () => string;
  exited: Promise<number | null>;
}

function startService(environment: NodeJS.ProcessEnv): Started {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: ROOT, env: environment });
  let output = '';
  child.stdout.on('data', (chunk) => (output += String(chunk)));
  child.stderr.on('data', (chunk) => (output += String(chunk)));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function waitFor(condition: () => boolean, timeout_ms: number): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('first start, the openssl signer, the data directory lock and SIGTERM', () => {
  let dataDirectory: string;
  let service: Started;
  let fileDatabase: TestDatabase | null = null;
  const environment: NodeJS.ProcessEnv = { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn' };

  beforeAll(async () => {
    dataDirectory = fs.mkdtempSync(path.join(os.tmpdir(), 'pay-start-'));
    environment.DATA_DIR = dataDirectory;
    delete environment.DATABASE_URL;
    if (usingPostgres) {
      // On the PostgreSQL run the service starts on this file's own, empty database.
      fileDatabase = await createTestDatabase();
      await fileDatabase.database.query('SELECT 1');
      environment.DATABASE_URL = fileDatabase.url!;
    }
    service = startService(environment);
    await waitFor(() => service.output().includes('listening at'), 40_000);
  }, 60_000);

  afterAll(async () => {
    if (service.child.exitCode === null) service.child.kill('SIGKILL');
    await fileDatabase?.close();
    fs.rmSync(dataDirectory, { recursive: true, force: true });
  });

  it('writes the sandbox credentials file and says where', () => {
    const credentialsPath = path.join(dataDirectory, 'sandbox-credentials.json');
    expect(service.output()).toContain(credentialsPath);
    const credentials = JSON.parse(fs.readFileSync(credentialsPath, 'utf8'));
    expect(Object.keys(credentials)).toEqual(['base_url', 'api_key', 'signing_secret', 'merchant_id', 'white_label_id']);
    expect(credentials.api_key).toMatch(/^sk_test_/);
    expect(credentials.base_url).toMatch(/^http:\/\/localhost:\d+$/);
    expect(fs.statSync(credentialsPath).mode & 0o777).toBe(0o600);
    expect(service.output()).not.toContain(credentials.api_key);
    expect(service.output()).not.toContain(credentials.signing_secret);
  });

  it('accepts a request signed by a shell script with openssl dgst -sha256 -hmac', async () => {
    const env = { ...process.env, CREDENTIALS: path.join(dataDirectory, 'sandbox-credentials.json') };
    const { stdout } = await run('bash', ['scripts/signed-request.sh', 'GET', '/v1/pay/events?since_sequence=0&limit=10'], { cwd: ROOT, env });
    expect(stdout).toMatch(/^HTTP\/1\.1 200/);
    expect(stdout.toLowerCase()).toContain('ratelimit-policy: 1200;w=60');
    expect(stdout).toContain('"object":"list"');
    const banks = await run('bash', ['scripts/signed-request.sh', 'GET', '/v1/pay/banks'], { cwd: ROOT, env });
    expect(banks.stdout).toMatch(/^HTTP\/1\.1 200/);
  });

  it.skipIf(usingPostgres)('refuses a second process on the same PGlite directory with a clear error', async () => {
    const second = startService({ ...environment });
    const code = await second.exited;
    expect(code).toBe(1);
    expect(second.output()).toContain('the data directory is in use by another process');
  });

  it('refuses to start an api-only process with a webhook setting production forbids, before opening anything', async () => {
    const refused = startService({ ...environment, NODE_ENV: 'production', MASTER_KEY: Buffer.alloc(32, 9).toString('base64'), WEBHOOK_SANDBOX_LOOPBACK: 'true', WORKER_ENABLED: 'false' });
    expect(await refused.exited).toBe(1);
    expect(refused.output()).toContain('WEBHOOK_SANDBOX_LOOPBACK cannot be true with NODE_ENV=production');
    expect(refused.output()).not.toContain('listening at');
  }, 60_000);

  it('stops on SIGTERM with exit code 0 and releases the directory lock', async () => {
    service.child.kill('SIGTERM');
    expect(await service.exited).toBe(0);
    expect(fs.existsSync(path.join(dataDirectory, 'service.lock'))).toBe(false);
  });
});

describe('graceful shutdown', () => {
  it('finishes an in-flight request before stopping', async () => {
    const gated = gatedControls();
    const app = await createTestApp({ extra_modules: [testWriteRoutes(gated)] });
    try {
      const address = await app.instance.app.listen({ port: 0, host: '127.0.0.1' });
      const body = JSON.stringify({ amount_minor: 5 });
      const pending = fetch(`${address}/v1/pay/test-writes`, {
        method: 'POST',
        body,
        headers: signedHeaders({
          api_key: app.sandbox.api_key, signing_secret: app.sandbox.signing_secret, method: 'POST', target: '/v1/pay/test-writes',
          body, idempotency_key: 'shutdown-1', timestamp_seconds: Math.floor(app.clock.now().getTime() / 1000),
        }),
      });
      await gated.waitEntered();
      const stopping = app.instance.stop();
      gated.open();
      const response = await pending;
      expect(response.status).toBe(201);
      await stopping;
    } finally {
      await app.testDatabase.close();
    }
  });
});
