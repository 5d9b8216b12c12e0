import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, TEST_MASTER_KEY, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { usingPostgres } from '../support/database.ts';
import { runCli, type CliIo } from '../../src/cli/commands.ts';
import {
  chooseBackend,
  createDirectBackend,
  createRemoteBackend,
  loadCliConfig,
  type AdminBackend,
} from '../../src/cli/backends.ts';

/**
 * The admin CLI, run in process through `runCli` with collected output. The direct backend is built on
 * the test app's own TenancyService, the remote one on the same app listening on a real port, so both
 * act on one database and their outputs can be compared. One test spawns the real entry point.
 */
const execFileAsync = promisify(execFile);
const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

let testApp: TestApp;
let baseUrl: string;
let directBackend: AdminBackend;
const temporaryDirectories: string[] = [];

beforeAll(async () => {
  testApp = await createTestApp();
  await testApp.instance.app.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.instance.app.server.address() as { port: number };
  baseUrl = `http://127.0.0.1:${address.port}`;
  directBackend = createDirectBackend({ tenancy: testApp.instance.services.tenancy });
});

afterAll(async () => {
  await testApp.close();
  for (const directory of temporaryDirectories) fs.rmSync(directory, { recursive: true, force: true });
});

function temporaryDirectory(): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-test-'));
  temporaryDirectories.push(directory);
  return directory;
}

function remoteBackend(token: string = testApp.operator_token): AdminBackend {
  return createRemoteBackend({ base_url: baseUrl, token });
}

/** Runs the CLI in process; `backend` replaces the automatic selection unless it is `null`. */
async function cli(argv: string[], options: { backend?: AdminBackend | null; env?: CliIo['env'] } = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const backend = options.backend === undefined ? directBackend : options.backend;
  const io: CliIo = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: options.env ?? {},
    ...(backend ? { openBackend: async () => backend } : {}),
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

async function cliJson<T>(argv: string[], backend?: AdminBackend): Promise<T> {
  const result = await cli([...argv, '--json'], { backend });
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as T;
}

interface Created {
  id: string;
  [field: string]: unknown;
}

describe('usage', () => {
  it('prints the global help with every command on --help and exits 0', async () => {
    const result = await cli(['--help']);
    expect(result.code).toBe(0);
    for (const command of ['brands create', 'merchants suspend', 'keys create', 'keys revoke', 'credentials revoke']) {
      expect(result.stdout).toContain(command);
    }
    expect(result.stderr).toBe('');
  });

  it('prints the help of one command, with its options, on --help', async () => {
    const result = await cli(['keys', 'create', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('--merchant <mch_…>');
    expect(result.stdout).toContain('--mode <test|live>');
    expect(result.stdout).toContain('--scopes');
  });

  it('prints the usage on stderr with exit 2 when run without a command', async () => {
    const result = await cli([]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('Usage:');
  });

  it('answers an unknown command, action or flag with a message on stderr and exit 2', async () => {
    for (const argv of [['frobnicate'], ['brands', 'explode'], ['brands', 'list', '--colour', 'red'], ['brands', 'list', 'extra']]) {
      const result = await cli(argv);
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/^error: /);
    }
  });

  it('refuses a missing required option, a value outside its choices, an unknown scope and both backends forced', async () => {
    const cases: [string[], RegExp][] = [
      [['merchants', 'create', '--name', 'No Brand'], /missing required option --brand/],
      [['keys', 'create', '--merchant', 'mch_x', '--mode', 'production'], /--mode must be one of test, live/],
      [['keys', 'create', '--merchant', 'mch_x', '--mode', 'test', '--scopes', 'pay:read,pay:admin'], /unknown scope pay:admin/],
      [['credentials', 'create', '--brand', 'wl_x', '--role', 'platform_admin', '--name', 'Root'], /--role must be one of/],
      [['brands', 'list', '--remote', '--direct'], /exclude each other/],
    ];
    for (const [argv, message] of cases) {
      const result = await cli(argv);
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.stderr).toMatch(message);
    }
  });

  it('reports a usage error as JSON on stderr under --json', async () => {
    const result = await cli(['brands', 'create', '--json']);
    expect(result.code).toBe(2);
    expect(JSON.parse(result.stderr)).toEqual({ error: { code: 'usage_error', message: expect.stringContaining('--name') } });
  });
});

describe('tenancy administration through the direct backend', () => {
  let brand: Created;
  let merchant: Created;
  let testKey: Created & { api_key: string; signing_secret: string; livemode: boolean };
  let liveKey: Created & { api_key: string; signing_secret: string; livemode: boolean };

  function credentialsOf(key: { api_key: string; signing_secret: string }): MerchantCredentials {
    return { white_label_id: brand.id, merchant_id: merchant.id, api_key: key.api_key, signing_secret: key.signing_secret };
  }

  beforeAll(async () => {
    brand = await cliJson<Created>(['brands', 'create', '--name', '  Acme Brand  ']);
    merchant = await cliJson<Created>(['merchants', 'create', '--brand', brand.id, '--name', 'Acme Shop']);
    testKey = await cliJson(['keys', 'create', '--merchant', merchant.id, '--mode', 'test']);
    liveKey = await cliJson(['keys', 'create', '--merchant', merchant.id, '--mode', 'live', '--scopes', 'pay:read']);
  });

  it('creates a brand, a merchant and keys of both modes with their secrets shown once', async () => {
    expect(brand).toMatchObject({ object: 'brand', name: 'Acme Brand', status: 'active' });
    expect(brand.id).toMatch(/^wl_/);
    expect(merchant).toMatchObject({ object: 'merchant', white_label_id: brand.id, status: 'active' });
    expect(merchant.id).toMatch(/^mch_/);
    expect(testKey).toMatchObject({ object: 'api_key', merchant_id: merchant.id, livemode: false, status: 'active' });
    expect(testKey.api_key).toMatch(/^sk_test_/);
    expect(testKey.signing_secret).toMatch(/^sig_test_/);
    expect(testKey.scopes).toEqual(['pay:read', 'pay:write', 'events:read']);
    expect(liveKey).toMatchObject({ livemode: true, scopes: ['pay:read'] });
    expect(liveKey.api_key).toMatch(/^sk_live_/);
    expect(liveKey.signing_secret).toMatch(/^sig_live_/);
  });

  it('lists brands, merchants and keys without ever printing a secret', async () => {
    const brands = await cliJson<Created[]>(['brands', 'list']);
    expect(brands.map((item) => item.id)).toContain(brand.id);
    const merchants = await cliJson<Created[]>(['merchants', 'list', '--brand', brand.id]);
    expect(merchants.map((item) => item.id)).toEqual([merchant.id]);
    const listed = await cli(['keys', 'list', '--merchant', merchant.id, '--json']);
    const keys = JSON.parse(listed.stdout) as Created[];
    expect(keys.map((item) => item.id).sort()).toEqual([testKey.id, liveKey.id].sort());
    const text = await cli(['keys', 'list', '--merchant', merchant.id]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(testKey.id);
    for (const output of [listed.stdout, text.stdout]) {
      expect(output).not.toContain(testKey.api_key);
      expect(output).not.toContain(testKey.signing_secret);
      expect(output).not.toMatch(/sk_(test|live)_|sig_(test|live)_/);
    }
  });

  it('prints human-readable text without --json, with the one-time reminder on stderr', async () => {
    const created = await cli(['keys', 'create', '--merchant', merchant.id, '--mode', 'test']);
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^api_key\s+sk_test_/m);
    expect(created.stdout).toMatch(/^signing_secret\s+sig_test_/m);
    expect(created.stderr).toContain('shown once');
    const brands = await cli(['brands', 'list']);
    expect(brands.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+STATUS\s+CREATED_AT$/);
  });

  it('suspending the merchant answers tenant_suspended to its keys, and resuming restores them', async () => {
    const request = { url: '/v1/pay/banks', credentials: credentialsOf(liveKey) };
    expect((await testApp.signed(request)).statusCode).toBe(200);

    const suspended = await cliJson<Created>(['merchants', 'suspend', '--merchant', merchant.id]);
    expect(suspended.status).toBe('suspended');
    const refused = await testApp.signed(request);
    expect(refused.statusCode).toBe(403);
    expect(errorOf(refused).code).toBe('tenant_suspended');

    const resumed = await cliJson<Created>(['merchants', 'resume', '--merchant', merchant.id]);
    expect(resumed.status).toBe('active');
    expect((await testApp.signed(request)).statusCode).toBe(200);
  });

  it('suspends and resumes a key', async () => {
    const request = { url: '/v1/pay/banks', credentials: credentialsOf(liveKey) };
    expect((await cliJson<Created>(['keys', 'suspend', '--key', liveKey.id])).status).toBe('suspended');
    expect(errorOf(await testApp.signed(request)).code).toBe('tenant_suspended');
    expect((await cliJson<Created>(['keys', 'resume', '--key', liveKey.id])).status).toBe('active');
    expect((await testApp.signed(request)).statusCode).toBe(200);
  });

  it('revokes a key so that the next signed request with it answers 401 api_key_revoked', async () => {
    const request = { url: '/v1/pay/banks', credentials: credentialsOf(testKey) };
    expect((await testApp.signed(request)).statusCode).toBe(200);
    const revoked = await cliJson<Created>(['keys', 'revoke', '--key', testKey.id]);
    expect(revoked).toMatchObject({ status: 'revoked', revoked_at: expect.any(String) });
    const refused = await testApp.signed(request);
    expect(refused.statusCode).toBe(401);
    expect(errorOf(refused).code).toBe('api_key_revoked');
    // Revocation is final: resuming a revoked key is refused (exit 1, api_key_already_revoked).
    const resumed = await cli(['keys', 'resume', '--key', testKey.id]);
    expect(resumed.code).toBe(1);
    expect(resumed.stderr).toContain('api_key_already_revoked');
    expect(errorOf(await testApp.signed(request)).code).toBe('api_key_revoked');
  });

  it('fails with exit 1, the error code and message, and no stack trace', async () => {
    const human = await cli(['merchants', 'suspend', '--merchant', 'mch_01ARZ3NDEKTSV4RRFFQ69G5FAV']);
    expect(human.code).toBe(1);
    expect(human.stdout).toBe('');
    expect(human.stderr).toBe('error: resource_not_found: No such resource in the scope of this account.\n');

    const machine = await cli(['merchants', 'create', '--brand', brand.id, '--name', 'x'.repeat(201), '--json']);
    expect(machine.code).toBe(1);
    expect(JSON.parse(machine.stderr)).toEqual({
      error: {
        code: 'validation_error',
        message: 'One or more fields are malformed.',
        details: { fields: [{ path: 'name', reason: 'too_long' }] },
      },
    });
    expect(machine.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('the remote backend', () => {
  it('prints the same JSON as the direct backend for brands list', async () => {
    const direct = await cli(['brands', 'list', '--json'], { backend: directBackend });
    const remote = await cli(['brands', 'list', '--json'], { backend: remoteBackend() });
    expect(remote.code).toBe(0);
    expect(remote.stdout).toBe(direct.stdout);
    expect((JSON.parse(remote.stdout) as unknown[]).length).toBeGreaterThan(0);
  });

  it('reports API errors with the same code and message as the direct backend', async () => {
    const argv = ['merchants', 'create', '--brand', 'wl_01ARZ3NDEKTSV4RRFFQ69G5FAV', '--name', 'Nowhere', '--json'];
    const direct = await cli(argv, { backend: directBackend });
    const remote = await cli(argv, { backend: remoteBackend() });
    expect(direct.code).toBe(1);
    expect(remote.code).toBe(1);
    expect(remote.stderr).toBe(direct.stderr);
    expect(JSON.parse(remote.stderr)).toMatchObject({ error: { code: 'resource_not_found' } });
  });

  it("keeps a brand operator away from another brand's merchant, and revoking its credential locks it out", async () => {
    const brandA = await cliJson<Created>(['brands', 'create', '--name', 'Brand A']);
    const brandB = await cliJson<Created>(['brands', 'create', '--name', 'Brand B']);
    const merchantA = await cliJson<Created>(['merchants', 'create', '--brand', brandA.id, '--name', 'Shop A']);
    const merchantB = await cliJson<Created>(['merchants', 'create', '--brand', brandB.id, '--name', 'Shop B']);
    const operator = await cliJson<Created & { token: string }>([
      'credentials', 'create', '--brand', brandA.id, '--role', 'operator', '--name', 'Brand A operator',
    ]);
    expect(operator).toMatchObject({ object: 'backoffice_credential', role: 'operator', white_label_id: brandA.id });
    expect(operator.id).toMatch(/^boc_/);
    const asOperatorA = remoteBackend(operator.token);

    const own = await cli(['merchants', 'suspend', '--merchant', merchantA.id, '--json'], { backend: asOperatorA });
    expect(own.code).toBe(0);
    expect(JSON.parse(own.stdout)).toMatchObject({ id: merchantA.id, status: 'suspended' });

    for (const argv of [
      ['merchants', 'suspend', '--merchant', merchantB.id],
      ['merchants', 'list', '--brand', brandB.id],
      ['keys', 'create', '--merchant', merchantB.id, '--mode', 'test'],
    ]) {
      const refused = await cli(argv, { backend: asOperatorA });
      expect(refused.code, argv.join(' ')).toBe(1);
      expect(refused.stderr).toMatch(/^error: resource_not_found: /);
    }
    const untouched = await cliJson<Created[]>(['merchants', 'list', '--brand', brandB.id]);
    expect(untouched[0]?.status).toBe('active');

    const revoked = await cliJson<Created>(['credentials', 'revoke', '--credential', operator.id]);
    expect(revoked.status).toBe('revoked');
    const locked = await cli(['merchants', 'list', '--brand', brandA.id], { backend: asOperatorA });
    expect(locked.code).toBe(1);
    expect(locked.stderr).toMatch(/^error: api_key_revoked: /);
    expect(locked.stderr).not.toContain(operator.token);
  });

  it('reports an unreachable service as exit 1 without a stack trace', async () => {
    const unreachable = createRemoteBackend({ base_url: 'http://127.0.0.1:1', token: testApp.operator_token, timeout_ms: 5_000 });
    const result = await cli(['brands', 'list'], { backend: unreachable });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^error: service_unreachable: could not reach the service at http:\/\/127\.0\.0\.1:1/);
    expect(result.stderr).not.toContain(testApp.operator_token);
  });
});

describe('backend selection', () => {
  /**
   * A PGlite data directory whose lock names a live process other than this one (the test runner that
   * started this worker): the lock code lets a process take over a lock that names itself.
   */
  function lockedDataDirectory(): string {
    const directory = temporaryDirectory();
    fs.writeFileSync(path.join(directory, 'service.lock'), String(process.ppid));
    return directory;
  }

  it('chooses direct on PostgreSQL or a free data directory, and remote while a live process holds it', () => {
    const free = temporaryDirectory();
    const locked = lockedDataDirectory();
    const stale = temporaryDirectory();
    // A pid far above any kernel's pid_max stands for a holder that has died.
    fs.writeFileSync(path.join(stale, 'service.lock'), '2147483646');
    expect(chooseBackend(loadCliConfig({ DATA_DIR: free }), 'auto')).toBe('direct');
    expect(chooseBackend(loadCliConfig({ DATA_DIR: stale }), 'auto')).toBe('direct');
    expect(chooseBackend(loadCliConfig({ DATA_DIR: locked }), 'auto')).toBe('remote');
    expect(chooseBackend(loadCliConfig({ DATA_DIR: locked, DATABASE_URL: 'postgres://localhost/x' }), 'auto')).toBe('direct');
    expect(chooseBackend(loadCliConfig({ DATA_DIR: locked }), 'direct')).toBe('direct');
    expect(chooseBackend(loadCliConfig({ DATA_DIR: free }), 'remote')).toBe('remote');
  });

  it('reaches the running service through PG_BASE_URL and PG_OPERATOR_TOKEN when the data directory is held', async () => {
    const env = { DATA_DIR: lockedDataDirectory(), PG_BASE_URL: baseUrl, PG_OPERATOR_TOKEN: testApp.operator_token };
    const automatic = await cli(['brands', 'list', '--json'], { backend: null, env });
    const direct = await cli(['brands', 'list', '--json'], { backend: directBackend });
    expect(automatic.code).toBe(0);
    expect(automatic.stdout).toBe(direct.stdout);
  });

  it('reads the operator credential file the first start wrote', async () => {
    const directory = lockedDataDirectory();
    const operatorFile = { base_url: baseUrl, credential_id: 'boc_test', role: 'platform_admin', token: testApp.operator_token };
    fs.writeFileSync(path.join(directory, 'operator-credentials.json'), JSON.stringify(operatorFile));
    const result = await cli(['brands', 'list', '--json'], { backend: null, env: { DATA_DIR: directory } });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual(JSON.parse((await cli(['brands', 'list', '--json'])).stdout));
  });

  it('fails with operator_credentials_missing when the service holds the directory and no credential is known', async () => {
    const result = await cli(['brands', 'list'], { backend: null, env: { DATA_DIR: lockedDataDirectory() } });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^error: operator_credentials_missing: /);
  });

  it.skipIf(!usingPostgres)('opens PostgreSQL itself when DATABASE_URL is set, whatever holds the data directory', async () => {
    const env = {
      DATABASE_URL: testApp.testDatabase.url ?? '',
      // The PgBouncer pass's URL goes through a transaction pooler, which needs its setting.
      DATABASE_POOLING: process.env.DATABASE_POOLING ?? 'session',
      DATA_DIR: lockedDataDirectory(),
      MASTER_KEY: TEST_MASTER_KEY.toString('base64'),
    };
    const automatic = await cli(['brands', 'list', '--json'], { backend: null, env });
    expect(automatic.stderr).toBe('');
    expect(automatic.code).toBe(0);
    expect(automatic.stdout).toBe((await cli(['brands', 'list', '--json'])).stdout);
  });

  it('refuses --direct while a live process holds the data directory', async () => {
    const result = await cli(['brands', 'list', '--direct'], { backend: null, env: { DATA_DIR: lockedDataDirectory() } });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^error: data_directory_locked: /);
  });
});

describe('the entry point', () => {
  it('runs `brands list --json` in a child process on a fresh PGlite directory: migrates and lists nothing', async () => {
    const dataDirectory = temporaryDirectory();
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDirectory };
    // The child must take the embedded path even when this test run itself uses PostgreSQL.
    delete env.DATABASE_URL;
    delete env.PG_BASE_URL;
    delete env.PG_OPERATOR_TOKEN;
    const { stdout } = await execFileAsync('npx', ['tsx', 'src/cli/main.ts', 'brands', 'list', '--json'], {
      cwd: PROJECT_ROOT,
      env,
      timeout: 60_000,
    });
    expect(JSON.parse(stdout)).toEqual([]);
    expect(fs.existsSync(path.join(dataDirectory, 'pgdata'))).toBe(true);
    // The CLI released the directory, so the service can start on it afterwards.
    expect(fs.existsSync(path.join(dataDirectory, 'service.lock'))).toBe(false);
  }, 60_000);
});
