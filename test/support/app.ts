import crypto from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { createServiceInstance, type ExtraRouteModule, type ServiceInstance } from '../../src/app.ts';
import type { WebhookOptions } from '../../src/webhooks/index.ts';
import { TestClock } from '../../src/platform/clock.ts';
import { loadConfig, type Config } from '../../src/platform/config.ts';
import { createLogger, type Logger } from '../../src/platform/logger.ts';
import type { JobHandler } from '../../src/jobs/index.ts';
import type { BankVerifier } from '../../src/verification/bank-port.ts';
import { signedHeaders } from '../../src/http/canonical.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { attachContractCheck, createContractRecorder, type ContractRecorder } from './contract.ts';

/**
 * A service instance on this test file's own database, with a test clock and a sandbox brand,
 * merchant and test key, plus helpers that sign requests exactly as a merchant would.
 */
export const TEST_MASTER_KEY = Buffer.alloc(32, 7);
export const TEST_START = '2026-08-01T00:00:00.000Z';

export interface MerchantCredentials {
  white_label_id: string;
  merchant_id: string;
  api_key: string;
  signing_secret: string;
}

export interface SignedRequestOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  /** A string is sent as is; anything else is JSON-encoded. */
  body?: unknown;
  idempotency_key?: string;
  credentials?: MerchantCredentials;
  /** Overrides of the computed headers (a null removes one). */
  headers?: Record<string, string | null>;
  timestamp_seconds?: number;
  nonce?: string;
  api_version?: string;
}

export interface TestApp {
  instance: ServiceInstance;
  testDatabase: TestDatabase;
  clock: TestClock;
  sandbox: MerchantCredentials;
  operator_token: string;
  /** Sends a signed merchant request through the in-process server. */
  signed(options: SignedRequestOptions): Promise<LightMyRequestResponse>;
  /** Sends a back-office request with a bearer token (the platform administrator's by default). */
  backoffice(options: { method?: 'GET' | 'POST'; url: string; body?: unknown; token?: string; idempotency_key?: string }): Promise<LightMyRequestResponse>;
  /** Creates another merchant (optionally in a new brand) with a key of the given mode. */
  createMerchant(options?: { white_label_id?: string; livemode?: boolean; scopes?: string[] }): Promise<MerchantCredentials>;
  /** Every answer of this app (and of its second instances) checked against the OpenAPI document (contract.ts). */
  contract: ContractRecorder;
  /** Stops the app, then fails when any answer disagreed with the OpenAPI document. */
  close(): Promise<void>;
}

export interface TestAppOptions {
  config?: Partial<Record<string, string>>;
  extra_modules?: ExtraRouteModule[];
  /** The webhooks module's options (settings, address policy, resolver). */
  webhooks?: WebhookOptions;
  job_handlers?: Record<string, JobHandler>;
  testDatabase?: TestDatabase;
  logger?: Logger;
  /** The live bank verifier, instead of the one SLIP_VERIFIER_URL configures (a provider adapter at a fake). */
  live_bank_verifier?: BankVerifier;
  /** The master keys and derivation root (key rotation tests); TEST_MASTER_KEY alone by default. */
  master_key?: Buffer;
  master_key_previous?: readonly Buffer[];
  derivation_key?: Buffer;
  /** A smaller scan window of the events feed than production's 10,000 (tests of the window). */
  events_scan_window?: number;
  /** A database that already has its sandbox (a restarted service): its credentials, instead of a new bootstrap. */
  existing_sandbox?: { sandbox: MerchantCredentials; operator_token: string };
}

export async function createTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const testDatabase = options.testDatabase ?? (await createTestDatabase());
  const clock = new TestClock(TEST_START);
  const config: Config = loadConfig({ LOG_LEVEL: 'silent', PORT: '0', HOST: '127.0.0.1', ...options.config });
  const instance = createServiceInstance({
    config,
    database: testDatabase.database,
    clock,
    logger: options.logger ?? createLogger('silent'),
    master_key: options.master_key ?? TEST_MASTER_KEY,
    master_key_previous: options.master_key_previous,
    derivation_key: options.derivation_key,
    extra_modules: options.extra_modules,
    webhooks: options.webhooks,
    job_handlers: options.job_handlers,
    owns_database: false,
    live_bank_verifier: options.live_bank_verifier,
    events_scan_window: options.events_scan_window,
  });
  const contract = createContractRecorder();
  attachContractCheck(instance.app, contract);
  await instance.app.ready();
  const bootstrap = options.existing_sandbox
    ? { ...options.existing_sandbox.sandbox, operator_token: options.existing_sandbox.operator_token }
    : await instance.services.tenancy.bootstrapSandbox();
  if (!bootstrap) throw new Error('the test database already had a brand');
  const sandbox: MerchantCredentials = {
    white_label_id: bootstrap.white_label_id,
    merchant_id: bootstrap.merchant_id,
    api_key: bootstrap.api_key,
    signing_secret: bootstrap.signing_secret,
  };

  async function signed(request: SignedRequestOptions) {
    const credentials = request.credentials ?? sandbox;
    const method = request.method ?? 'GET';
    const payload = request.body === undefined ? '' : typeof request.body === 'string' ? request.body : JSON.stringify(request.body);
    const headers: Record<string, string> = signedHeaders({
      api_key: credentials.api_key,
      signing_secret: credentials.signing_secret,
      method,
      target: request.url,
      body: payload,
      idempotency_key: request.idempotency_key,
      api_version: request.api_version,
      timestamp_seconds: request.timestamp_seconds ?? Math.floor(clock.now().getTime() / 1000),
      nonce: request.nonce ?? crypto.randomBytes(12).toString('hex'),
    });
    for (const [name, value] of Object.entries(request.headers ?? {})) {
      if (value === null) delete headers[name.toLowerCase()];
      else headers[name.toLowerCase()] = value;
    }
    return instance.app.inject({ method, url: request.url, headers, payload: payload || undefined });
  }

  async function backoffice(request: { method?: 'GET' | 'POST'; url: string; body?: unknown; token?: string; idempotency_key?: string }) {
    const headers: Record<string, string> = { authorization: `Bearer ${request.token ?? bootstrap!.operator_token}` };
    if (request.body !== undefined) headers['content-type'] = 'application/json';
    if (request.idempotency_key !== undefined) headers['idempotency-key'] = request.idempotency_key;
    return instance.app.inject({
      method: request.method ?? 'GET',
      url: request.url,
      headers,
      payload: request.body === undefined ? undefined : JSON.stringify(request.body),
    });
  }

  const actor = { actor_type: 'system' as const, actor_id: 'test', request_id: null };

  async function createMerchant(merchantOptions: { white_label_id?: string; livemode?: boolean; scopes?: string[] } = {}) {
    const tenancy = instance.services.tenancy;
    const brandId = merchantOptions.white_label_id ?? (await tenancy.createBrand(actor, { name: 'Other Brand' })).id;
    const merchant = await tenancy.createMerchant(actor, { white_label_id: brandId, name: 'Other Merchant' });
    const key = await tenancy.createApiKey(actor, {
      merchant_id: merchant.id,
      scope_white_label_id: brandId,
      livemode: merchantOptions.livemode ?? false,
      scopes: merchantOptions.scopes,
    });
    return { white_label_id: brandId, merchant_id: merchant.id, api_key: key.api_key, signing_secret: key.signing_secret };
  }

  return {
    instance,
    testDatabase,
    clock,
    sandbox,
    operator_token: bootstrap.operator_token,
    signed,
    backoffice,
    createMerchant,
    contract,
    async close() {
      await instance.stop();
      await testDatabase.close();
      contract.assertClean();
    },
  };
}

/**
 * A second service instance on its own pool over the same PostgreSQL database and clock: another
 * process, as far as the database can tell.
 */
export async function openSecondInstance(app: TestApp, extra_modules: ExtraRouteModule[] = []): Promise<ServiceInstance> {
  const database = await app.testDatabase.openAnother();
  const second = createServiceInstance({
    config: loadConfig({ LOG_LEVEL: 'silent' }),
    database,
    clock: app.clock,
    logger: createLogger('silent'),
    master_key: TEST_MASTER_KEY,
    extra_modules,
    owns_database: false,
  });
  attachContractCheck(second.app, app.contract);
  await second.app.ready();
  return second;
}

export function errorOf(response: LightMyRequestResponse): { code: string; details: Record<string, unknown>; [key: string]: unknown } {
  return (response.json() as { error: { code: string; details: Record<string, unknown> } }).error;
}
