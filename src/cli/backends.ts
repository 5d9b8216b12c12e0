import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { openConfiguredDatabase, resolveMasterKeyring } from '../app.ts';
import { parseOrThrow } from '../http/validation.ts';
import { SystemClock } from '../platform/clock.ts';
import { loadConfig, type Config } from '../platform/config.ts';
import { SecretBox, type MasterKeyring } from '../platform/crypto.ts';
import { DataDirectoryLocked, readLockHolder, type Database } from '../platform/db.ts';
import { createLogger, scrubText } from '../platform/logger.ts';
import {
  TenancyService,
  type ApiKeyView,
  type BackofficeCredentialView,
  type BrandView,
  type MerchantView,
} from '../tenancy/service.ts';
import type { AccountStatus, KeyStatus } from '../tenancy/types.ts';
import type { Actor, ApiKeyScope } from '../platform/access.ts';
import { idText, nameSchema, staffIdText } from '../tenancy/schemas.ts';

/**
 * The two ways the admin CLI reaches tenancy: directly on the database (PostgreSQL, or PGlite when no
 * process holds it) or through the running service's back-office API (when the service holds the
 * embedded PGlite directory, which only one process may open). Both return the view objects of
 * tenancy/service.ts and fail with the same error codes, so the CLI prints the same thing either way.
 */

export type BackendKind = 'direct' | 'remote';
export type BackendPreference = BackendKind | 'auto';

export type CreatedApiKey = ApiKeyView & { api_key: string; signing_secret: string };
export type CreatedCredential = BackofficeCredentialView & { token: string };

export interface AdminBackend {
  readonly kind: BackendKind;
  createBrand(input: { name: string }): Promise<BrandView>;
  listBrands(): Promise<BrandView[]>;
  setBrandStatus(white_label_id: string, status: AccountStatus): Promise<BrandView>;
  createMerchant(input: { white_label_id: string; name: string }): Promise<MerchantView>;
  listMerchants(white_label_id: string): Promise<MerchantView[]>;
  setMerchantStatus(merchant_id: string, status: AccountStatus): Promise<MerchantView>;
  createApiKey(input: { merchant_id: string; mode: 'test' | 'live'; scopes?: readonly ApiKeyScope[] }): Promise<CreatedApiKey>;
  listApiKeys(merchant_id: string): Promise<ApiKeyView[]>;
  setApiKeyStatus(api_key_id: string, status: KeyStatus): Promise<ApiKeyView>;
  /** `staff_id` names the person who holds a credential already; without it the credential goes to a new person. */
  createCredential(input: { white_label_id: string; role: 'operator' | 'reviewer'; name: string; staff_id?: string }): Promise<CreatedCredential>;
  revokeCredential(credential_id: string): Promise<BackofficeCredentialView>;
  /** Releases what the backend opened (the database and its lock); a no-op for injected services. */
  close(): Promise<void>;
}

/**
 * A failure the CLI reports as `code: message`. API errors of the remote backend arrive as these with
 * the service's code and message; local problems (no credentials, service unreachable) get CLI codes.
 */
export class CliError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Anything with a `write(text)`, such as process.stderr or a test's collector. */
export interface TextSink {
  write(text: string): unknown;
}

export type CliEnvironment = Record<string, string | undefined>;

// The same field rules as the back-office routes, so that the direct backend trims names and
// rejects the same input with the same validation_error as the HTTP routes do.
const brandBodySchema = z.object({ name: nameSchema });
const merchantBodySchema = z.object({ name: nameSchema, white_label_id: idText });
const credentialBodySchema = z.object({ name: nameSchema, white_label_id: idText, role: z.enum(['operator', 'reviewer']), staff_id: staffIdText.optional() });

export interface DirectBackendOptions {
  tenancy: TenancyService;
  /** Who the audit log names; defaults to the operating-system user under actor type `cli`. */
  actor?: Actor;
  /** Called by `close`; the owner of an injected service passes nothing and closes it itself. */
  close?: () => Promise<void>;
}

export function cliActor(): Actor {
  let username = 'cli';
  try {
    username = os.userInfo().username || 'cli';
  } catch {
    // Some containers run under a uid with no passwd entry; the audit log then names the CLI itself.
  }
  return { actor_type: 'cli', actor_id: username, request_id: null };
}

/**
 * Calls TenancyService in this process. It acts with platform scope (no brand restriction), because
 * whoever can open the database can change any brand anyway.
 */
export function createDirectBackend(options: DirectBackendOptions): AdminBackend {
  const tenancy = options.tenancy;
  const actor = options.actor ?? cliActor();
  const scope = null;
  return {
    kind: 'direct',
    async createBrand(input) {
      return tenancy.createBrand(actor, parseOrThrow(brandBodySchema, input));
    },
    listBrands: () => tenancy.listBrands(),
    setBrandStatus: (white_label_id, status) => tenancy.setBrandStatus(actor, white_label_id, status),
    async createMerchant(input) {
      return tenancy.createMerchant(actor, parseOrThrow(merchantBodySchema, input));
    },
    listMerchants: (white_label_id) => tenancy.listMerchants(white_label_id),
    setMerchantStatus: (merchant_id, status) => tenancy.setMerchantStatus(actor, merchant_id, scope, status),
    createApiKey: (input) =>
      tenancy.createApiKey(actor, {
        merchant_id: input.merchant_id,
        scope_white_label_id: scope,
        livemode: input.mode === 'live',
        scopes: input.scopes,
      }),
    listApiKeys: (merchant_id) => tenancy.listApiKeys(merchant_id, scope),
    setApiKeyStatus: (api_key_id, status) => tenancy.setApiKeyStatus(actor, api_key_id, scope, status),
    async createCredential(input) {
      return tenancy.createBackofficeCredential(actor, parseOrThrow(credentialBodySchema, input));
    },
    revokeCredential: (credential_id) => tenancy.setBackofficeCredentialStatus(actor, credential_id, scope, 'revoked'),
    close: options.close ?? (async () => {}),
  };
}

export interface RemoteBackendOptions {
  base_url: string;
  token: string;
  /** Replaceable for tests; the global fetch by default. */
  fetch?: typeof fetch;
  timeout_ms?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;

const errorBodySchema = z.object({
  error: z.object({
    code: z.string().min(1),
    message: z.string(),
    details: z.record(z.string(), z.unknown()).optional(),
  }),
});

interface ListBody<Item> {
  object: 'list';
  data: Item[];
}

/**
 * The JSON body of a service answer, or the CliError that its error body names: the one reading of the
 * service's answers for every command that calls it over HTTP.
 */
export async function readServiceAnswer<Body>(response: Response): Promise<Body> {
  const text = await response.text();
  let decoded: unknown = undefined;
  try {
    decoded = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    decoded = undefined;
  }
  if (!response.ok) {
    const failure = errorBodySchema.safeParse(decoded);
    if (failure.success) throw new CliError(failure.data.error.code, failure.data.error.message, failure.data.error.details ?? {});
    throw new CliError('unexpected_response', `the service answered HTTP ${response.status} without an error body`);
  }
  if (decoded === undefined || decoded === null || typeof decoded !== 'object') {
    throw new CliError('unexpected_response', `the service answered HTTP ${response.status} without a JSON body`);
  }
  return decoded as Body;
}

/** Why fetch failed, in a few words: the socket error code or the abort reason, never a stack. */
export function networkReason(error: unknown): string {
  if (error instanceof Error) {
    if (error.name === 'TimeoutError' || error.name === 'AbortError') return 'no answer before the time limit';
    const cause = (error as Error & { cause?: unknown }).cause;
    if (cause && typeof cause === 'object' && 'code' in cause && typeof cause.code === 'string') return cause.code;
    return scrubText(error.message);
  }
  return 'unknown network error';
}

/** Calls the back-office routes with a bearer token; identifiers are path-encoded, never spliced raw. */
export function createRemoteBackend(options: RemoteBackendOptions): AdminBackend {
  const baseUrl = options.base_url.replace(/\/+$/, '');
  const fetchFunction = options.fetch ?? fetch;
  const timeoutMs = options.timeout_ms ?? DEFAULT_TIMEOUT_MS;
  const segment = (value: string) => encodeURIComponent(value);

  async function call<Body>(method: 'GET' | 'POST', pathname: string, body?: unknown): Promise<Body> {
    const headers: Record<string, string> = {
      authorization: `Bearer ${options.token}`,
      accept: 'application/json',
    };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await fetchFunction(`${baseUrl}${pathname}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        // A redirect could carry the token to another address; the operator should fix PG_BASE_URL instead.
        redirect: 'error',
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw new CliError('service_unreachable', `could not reach the service at ${baseUrl} (${networkReason(error)})`);
    }
    return readServiceAnswer<Body>(response);
  }

  async function list<Item>(pathname: string): Promise<Item[]> {
    const body = await call<ListBody<Item>>('GET', pathname);
    if (!Array.isArray(body.data)) throw new CliError('unexpected_response', 'the service answered a list without data');
    return body.data;
  }

  const brandAction = (status: AccountStatus) => (status === 'suspended' ? 'suspend' : 'resume');

  return {
    kind: 'remote',
    createBrand: (input) => call('POST', '/v1/bo/brands', { name: input.name }),
    listBrands: () => list('/v1/bo/brands'),
    setBrandStatus: (white_label_id, status) => call('POST', `/v1/bo/brands/${segment(white_label_id)}/${brandAction(status)}`),
    createMerchant: (input) => call('POST', '/v1/bo/merchants', { name: input.name, white_label_id: input.white_label_id }),
    listMerchants: (white_label_id) => list(`/v1/bo/merchants?white_label_id=${segment(white_label_id)}`),
    setMerchantStatus: (merchant_id, status) => call('POST', `/v1/bo/merchants/${segment(merchant_id)}/${brandAction(status)}`),
    createApiKey: (input) =>
      call('POST', `/v1/bo/merchants/${segment(input.merchant_id)}/api-keys`, {
        mode: input.mode,
        ...(input.scopes ? { scopes: [...input.scopes] } : {}),
      }),
    listApiKeys: (merchant_id) => list(`/v1/bo/merchants/${segment(merchant_id)}/api-keys`),
    setApiKeyStatus(api_key_id, status) {
      const action = status === 'revoked' ? 'revoke' : status === 'suspended' ? 'suspend' : 'resume';
      return call('POST', `/v1/bo/api-keys/${segment(api_key_id)}/${action}`);
    },
    createCredential: (input) =>
      call('POST', '/v1/bo/credentials', {
        name: input.name,
        role: input.role,
        white_label_id: input.white_label_id,
        ...(input.staff_id === undefined ? {} : { staff_id: input.staff_id }),
      }),
    revokeCredential: (credential_id) => call('POST', `/v1/bo/credentials/${segment(credential_id)}/revoke`),
    close: async () => {},
  };
}

/** Loads the configuration from the CLI's environment; a bad value is a CLI failure, not a crash. */
export function loadCliConfig(env: CliEnvironment): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    throw new CliError('invalid_configuration', scrubText(error instanceof Error ? error.message : String(error)));
  }
}

/**
 * Automatic selection: PostgreSQL serves many processes, so DATABASE_URL means direct; otherwise the
 * PGlite directory decides, remote when a live process holds its lock and direct when none does.
 */
export function chooseBackend(config: Config, preference: BackendPreference): BackendKind {
  if (preference !== 'auto') return preference;
  if (config.database_url) return 'direct';
  return readLockHolder(path.resolve(config.data_dir)) === null ? 'direct' : 'remote';
}

const operatorFileSchema = z.object({ base_url: z.string().min(1).optional(), token: z.string().min(1).optional() });

/** The running service's address and an operator token: env overrides first, then the first-start file. */
export function readOperatorCredentials(config: Config, env: CliEnvironment): { base_url: string; token: string } {
  const filePath = path.join(path.resolve(config.data_dir), 'operator-credentials.json');
  let fromFile: z.infer<typeof operatorFileSchema> = {};
  let fileText: string | null = null;
  try {
    fileText = fs.readFileSync(filePath, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new CliError('operator_credentials_unreadable', `cannot read ${filePath} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  if (fileText !== null) {
    let parsed: ReturnType<typeof operatorFileSchema.safeParse>;
    try {
      parsed = operatorFileSchema.safeParse(JSON.parse(fileText));
    } catch {
      throw new CliError('operator_credentials_unreadable', `${filePath} is not valid JSON`);
    }
    if (!parsed.success) throw new CliError('operator_credentials_unreadable', `${filePath} does not hold base_url and token`);
    fromFile = parsed.data;
  }
  const baseUrl = env.PG_BASE_URL || fromFile.base_url;
  const token = env.PG_OPERATOR_TOKEN || fromFile.token;
  if (!baseUrl || !token) {
    throw new CliError(
      'operator_credentials_missing',
      `the service holds the data directory, and no operator credential was found in ${filePath}; ` +
        'set PG_BASE_URL and PG_OPERATOR_TOKEN to reach its back-office API',
    );
  }
  return { base_url: baseUrl, token };
}

async function openDirectBackend(config: Config, stderr: TextSink): Promise<AdminBackend> {
  // Only errors reach the terminal: the service's informational JSON logs would bury the CLI's output.
  const logger = createLogger('error', { write: (line: string) => void stderr.write(line) });
  let keyring: MasterKeyring;
  try {
    keyring = resolveMasterKeyring(config, logger);
  } catch (error) {
    throw new CliError('invalid_configuration', scrubText(error instanceof Error ? error.message : String(error)));
  }
  let database: Database;
  try {
    database = await openConfiguredDatabase(config, logger);
  } catch (error) {
    if (error instanceof DataDirectoryLocked) throw error;
    throw new CliError('database_unavailable', scrubText(error instanceof Error ? error.message : String(error)));
  }
  const tenancy = new TenancyService(database, new SystemClock(), SecretBox.fromKeyring(keyring));
  return createDirectBackend({ tenancy, close: () => database.close() });
}

/**
 * Opens the backend the environment calls for. When automatic selection chose direct but the service
 * took the PGlite lock in the meantime, the CLI falls back to the API instead of failing.
 */
export async function connectBackend(env: CliEnvironment, preference: BackendPreference, stderr: TextSink): Promise<AdminBackend> {
  const config = loadCliConfig(env);
  const kind = chooseBackend(config, preference);
  if (kind === 'direct') {
    try {
      return await openDirectBackend(config, stderr);
    } catch (error) {
      if (!(error instanceof DataDirectoryLocked)) throw error;
      if (preference === 'direct') throw new CliError('data_directory_locked', scrubText(error.message));
    }
  }
  return createRemoteBackend(readOperatorCredentials(config, env));
}
