import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceInstance, type ServiceInstance } from '../../src/app.ts';
import { SystemClock } from '../../src/platform/clock.ts';
import { loadConfig } from '../../src/platform/config.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { TEST_MASTER_KEY } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

/**
 * The example merchant app (examples/merchant-app), run as a merchant runs it: its own process, against
 * the service listening on a real port with its worker and webhook dispatcher running in real time. The
 * app creates a 100.00 THB sandbox deposit with the SDK, prints the checkout link, receives the webhooks
 * through `npm run cli -- listen`, learns the settlement from them, and reconciles the feed.
 */

const repository = path.resolve(import.meta.dirname, '..', '..');
let database: TestDatabase;
let instance: ServiceInstance;
let baseUrl: string;
let credentials: { api_key: string; signing_secret: string };
let dataDirectory: string;

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

beforeAll(async () => {
  if (!fs.existsSync(path.join(repository, 'packages/sdk/dist/index.js'))) throw new Error('the SDK is not built: npm run build:sdk (npm install and npm test build it)');
  database = await createTestDatabase();
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  dataDirectory = fs.mkdtempSync(path.join(os.tmpdir(), 'example-app-'));
  instance = createServiceInstance({
    config: loadConfig({ LOG_LEVEL: 'silent', PORT: String(port), HOST: '127.0.0.1', PUBLIC_BASE_URL: baseUrl, DATA_DIR: dataDirectory }),
    database: database.database,
    clock: new SystemClock(),
    logger: createLogger('silent'),
    master_key: TEST_MASTER_KEY,
    owns_database: false,
  });
  await instance.listen();
  const sandbox = await instance.services.tenancy.bootstrapSandbox();
  if (!sandbox) throw new Error('the test database already had a brand');
  credentials = { api_key: sandbox.api_key, signing_secret: sandbox.signing_secret };
}, 120_000);

afterAll(async () => {
  await instance?.stop();
  await database?.close();
  fs.rmSync(dataDirectory, { recursive: true, force: true });
});

describe('examples/merchant-app', () => {
  it('creates a deposit, shows its checkout link, receives its webhooks until settled, and reconciles', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'examples/merchant-app/main.ts', '--port', '0', '--wait-seconds', '90'], {
      cwd: repository,
      env: { ...process.env, PG_BASE_URL: baseUrl, PG_API_KEY: credentials.api_key, PG_SIGNING_SECRET: credentials.signing_secret, DATA_DIR: dataDirectory },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    const id = /deposit (dep_[0-9A-Z]+) created: awaiting_payment, 100\.00 THB/.exec(stdout)?.[1];
    expect(id, stdout).toBeTruthy();
    const link = /checkout link: (\S+)/.exec(stdout)?.[1];
    expect(link).toMatch(new RegExp(`^${baseUrl}/checkout/`));
    // The link the app showed is served: the hosted page (after its one-time redirect).
    const page = await fetch(link!, { redirect: 'manual' });
    expect([200, 302, 303]).toContain(page.status);
    expect(stdout).toMatch(new RegExp(`webhook {2}deposit\\.created ${id} v1 awaiting_payment {2}-> applied`));
    expect(stdout).toMatch(new RegExp(`webhook {2}deposit\\.settled ${id} v\\d+ settled credited \\d+ satang {2}-> applied`));
    expect(stdout).toContain(`deposit ${id} is settled`);
    expect(stdout).toMatch(/reconciled \d+ events after sequence \d+: \d+ not seen by webhook, 0 gaps \(0 lost\)/);
    expect(stdout).toMatch(/balance: available -?\d+, pending clearing [1-9]\d*, reserved \d+ satang/);
    // The deposit really is settled at the service.
    const { rows } = await database.database.query<{ status: string }>('SELECT status FROM deposit_orders WHERE deposit_id = $1', [id]);
    expect(rows[0]?.status).toBe('settled');
  }, 150_000);
});
