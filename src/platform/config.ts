import net from 'node:net';
import { z } from 'zod';

/** Load shedding's settings (src/ops/load-shedding.ts reads them). */
export interface LoadSheddingSettings {
  /** Off: nothing is ever shed (a deployment that sheds at its proxy instead). */
  enabled: boolean;
  /** The event loop's p99 delay that counts as full pressure (pressure 1). */
  event_loop_delay_ms: number;
  /** The longest connection wait of a transaction that counts as full pressure (pressure 1). */
  database_wait_ms: number;
  /** How often the signals are read and the level recomputed. */
  interval_ms: number;
}

export const DEFAULT_LOAD_SHEDDING: LoadSheddingSettings = {
  enabled: true,
  event_loop_delay_ms: 200,
  database_wait_ms: 250,
  interval_ms: 500,
};

/**
 * Configuration comes from the environment only, parsed once at start-up. A bad value stops the start
 * with a message naming the variable, never with a half-configured service.
 */
const booleanText = z
  .enum(['true', 'false', '1', '0'])
  .transform((text) => text === 'true' || text === '1');

const environmentSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  PUBLIC_BASE_URL: z.url().optional(),
  /** Where slips are uploaded (`slip_upload.upload_url`); the service's own address by default. */
  UPLOAD_BASE_URL: z.url().optional(),
  /**
   * Where hosted checkout pages are served (`checkout_url`), for brands without an address of their own:
   * an origin (scheme, host and port); the service's own address by default.
   */
  CHECKOUT_BASE_URL: z.url().optional(),
  /** The origin the back-office console (/bo/) is served on, and its sign-in links name; the service's own by default. */
  BACKOFFICE_BASE_URL: z.url().optional(),
  DATABASE_URL: z.string().min(1).optional(),
  DATA_DIR: z.string().min(1).default('./data'),
  /** 32 bytes, standard base64. Without it the embedded mode keeps a generated key in DATA_DIR. */
  MASTER_KEY: z.string().optional(),
  /** Earlier master keys (comma-separated, each 32 bytes in base64), only to open values sealed before a rotation. */
  MASTER_KEY_PREVIOUS: z.string().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Which key environments this deployment accepts: a key of another one answers api_key_invalid. */
  ACCEPTED_MODES: z.string().default('test,live'),
  API_ENABLED: booleanText.default(true),
  WORKER_ENABLED: booleanText.default(true),
  /**
   * Off: the start applies no migration and refuses to start when the database is behind this code's
   * migrations; they run as their own step (`npm run migrate`) before the new code starts.
   */
  MIGRATE_ON_START: booleanText.default(true),
  DB_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(10),
  /**
   * `transaction` behind a pooler in transaction pooling (PgBouncer's `pool_mode = transaction`): statements
   * are unnamed and nothing is kept in a server session. `session` (default) for a direct connection.
   */
  DATABASE_POOLING: z.enum(['session', 'transaction']).default('session'),
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
  /**
   * The worker's fallback poll, when nothing woke it; at most a minute (src/jobs/worker.ts). On PostgreSQL
   * a LISTEN wakes it when a job is committed or falls due, so the poll only covers what a lost connection missed.
   */
  WORKER_POLL_INTERVAL_MS: z.coerce.number().int().min(10).max(60_000).default(250),
  /** On PostgreSQL, a worker listens for jobs that fall due (LISTEN jobs_due); off: it only polls. */
  WORKER_LISTEN: booleanText.default(true),
  /**
   * The connection the worker's LISTEN session opens: the PostgreSQL server itself, since a session's LISTEN
   * cannot pass through PgBouncer's transaction pooling. DATABASE_URL by default.
   */
  DATABASE_LISTEN_URL: z.string().min(1).optional(),
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(25_000),
  NODE_ENV: z.string().default('development'),
  /** Where slip evidence is kept: in PostgreSQL with its receipt (default), in a directory, or in an S3 bucket. */
  SLIP_EVIDENCE_STORE: z.enum(['postgres', 'filesystem', 's3']).default('postgres'),
  /** The directory of the filesystem evidence store; DATA_DIR/slips by default. */
  SLIP_EVIDENCE_DIR: z.string().min(1).optional(),
  /** The S3 evidence store (src/slips/s3-blob-store.ts); the bucket is required with SLIP_EVIDENCE_STORE=s3. */
  SLIP_EVIDENCE_S3_BUCKET: z.string().min(3).max(63).optional(),
  /** Folders of ids-like names, each ending in `/` (no segment of dots): keys stay `<prefix><brand>/<receipt>`. */
  SLIP_EVIDENCE_S3_PREFIX: z.string().max(200).regex(/^([A-Za-z0-9_-][A-Za-z0-9._-]*\/)*$/).default(''),
  SLIP_EVIDENCE_S3_ENDPOINT: z.url().optional(),
  SLIP_EVIDENCE_S3_REGION: z.string().min(1).max(50).default('us-east-1'),
  SLIP_EVIDENCE_S3_FORCE_PATH_STYLE: booleanText.default(false),
  SLIP_EVIDENCE_S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  SLIP_EVIDENCE_S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  SLIP_EVIDENCE_S3_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  SLIP_EVIDENCE_S3_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(10).default(3),
  /** Days a slip image is kept after its receipt, then purged (docs/decisions/slips.md); unset keeps every image. */
  EVIDENCE_RETENTION_DAYS: z.coerce.number().int().min(90).max(36_500).optional(),
  /** The live slip-verification provider (src/verification/http-adapter.ts); unset means live bank checking is off. */
  SLIP_VERIFIER_URL: z.url().optional(),
  SLIP_VERIFIER_KEY: z.string().min(1).optional(),
  SLIP_VERIFIER_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5_000),
  /**
   * The slip-verification providers a brand may choose (src/slip-providers/): each one's base URL (its public
   * one by default) and resilience settings. The credentials are the brand's, set in the back office.
   */
  ...providerEnvironment('SLIPOK'),
  ...providerEnvironment('EASYSLIP'),
  ...providerEnvironment('RDCW'),
  /**
   * The bearer credential a Prometheus scraper sends to `/metrics` (at least 32 characters). Unset, the
   * metrics are not served: they show every tenant's traffic by route.
   */
  METRICS_TOKEN: z.string().min(32).max(512).optional(),
  TRUSTED_PROXIES: z.string().max(4000).optional(),
  /** Load shedding (src/ops/load-shedding.ts): on by default; the two thresholds are full pressure. */
  LOAD_SHEDDING: booleanText.default(true),
  LOAD_SHED_EVENT_LOOP_DELAY_MS: z.coerce.number().int().min(10).max(60_000).default(200),
  LOAD_SHED_DATABASE_WAIT_MS: z.coerce.number().int().min(10).max(60_000).default(250),
  /** The transport's bounds (src/http/node-server.ts, body-reader.ts; docs/reliability.md). */
  HTTP_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(1_000_000).default(1024),
  HTTP_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(20_000),
  HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(180_000),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(72_000),
  HTTP_BODY_BUFFER_BYTES: z.coerce.number().int().min(64 * 1024).max(16 * 1024 * 1024 * 1024).default(64 * 1024 * 1024),
  HTTP_BODY_DEADLINE_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  HTTP_BODY_MIN_BYTES_PER_WINDOW: z.coerce.number().int().min(1).max(1024 * 1024 * 1024).default(10 * 1024),
  HTTP_BODY_RATE_WINDOW_MS: z.coerce.number().int().min(50).max(600_000).default(10_000),
  /** Slip uploads read and stored at once by this process, and the queue in front of them. */
  SLIP_UPLOAD_CONCURRENCY: z.coerce.number().int().min(1).max(1024).default(8),
  SLIP_UPLOAD_MAX_WAITING: z.coerce.number().int().min(0).max(100_000).default(64),
  SLIP_UPLOAD_MAX_WAIT_MS: z.coerce.number().int().min(10).max(600_000).default(30_000),
  SLIP_BODY_DEADLINE_MS: z.coerce.number().int().min(100).max(3_600_000).default(120_000),
});

/** The environment variables of one provider: SLIP_PROVIDER_<NAME>_URL, _TIMEOUT_MS, _MAX_ATTEMPTS, _BREAKER_THRESHOLD, _BREAKER_HALF_OPEN_MS. */
function providerEnvironment<Name extends string>(name: Name) {
  return {
    [`SLIP_PROVIDER_${name}_URL`]: z.url().optional(),
    [`SLIP_PROVIDER_${name}_TIMEOUT_MS`]: z.coerce.number().int().min(100).max(60_000).default(5_000),
    [`SLIP_PROVIDER_${name}_MAX_ATTEMPTS`]: z.coerce.number().int().min(1).max(10).default(3),
    [`SLIP_PROVIDER_${name}_BREAKER_THRESHOLD`]: z.coerce.number().int().min(1).max(1_000).default(5),
    [`SLIP_PROVIDER_${name}_BREAKER_HALF_OPEN_MS`]: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  } as Record<`SLIP_PROVIDER_${Name}_${'URL'}`, z.ZodOptional<z.ZodURL>> &
    Record<`SLIP_PROVIDER_${Name}_${'TIMEOUT_MS' | 'MAX_ATTEMPTS' | 'BREAKER_THRESHOLD' | 'BREAKER_HALF_OPEN_MS'}`, z.ZodDefault<z.ZodCoercedNumber>>;
}

/** One slip-verification provider's deployment settings; `url` null means its public base URL. */
export interface SlipProviderSettings {
  url: string | null;
  timeout_ms: number;
  max_attempts: number;
  breaker_threshold: number;
  breaker_half_open_after_ms: number;
}

/** The S3 evidence store's settings (src/slips/s3-blob-store.ts). */
export interface S3BlobStoreSettings {
  bucket: string;
  /** Put before every key, for example `slips/`; may be empty. */
  prefix: string;
  /** The S3-compatible server's URL; null for Amazon S3 itself (the region's endpoint). */
  endpoint: string | null;
  region: string;
  /** Path-style addressing (`<endpoint>/<bucket>/<key>`), which most S3-compatible servers need. */
  force_path_style: boolean;
  /** Static credentials; null uses the SDK's default chain (environment, profile, instance role). */
  credentials: { access_key_id: string; secret_access_key: string } | null;
  /** The deadline of one call, over all its attempts. */
  timeout_ms: number;
  max_attempts: number;
}

export interface Config {
  port: number;
  host: string;
  /** The address the service advertises in URLs it returns; no trailing slash. */
  public_base_url: string | null;
  /** The scraper's bearer credential for `/metrics`; null: metrics are not served. */
  metrics_token: string | null;
  /**
   * Addresses and CIDR ranges of the reverse proxies in front of the service. A request arriving from one
   * of them is attributed to the address it names in X-Forwarded-For (the nearest untrusted hop); without
   * this list, X-Forwarded-For is ignored, so no client can choose the address its rate bucket is keyed by.
   */
  trusted_proxies: string[];
  load_shedding: LoadSheddingSettings;
  /** The base of `slip_upload.upload_url`; null means the service's own address. No trailing slash. */
  upload_base_url: string | null;
  /** The origin of `checkout_url` for brands without their own; null means the service's own address. */
  checkout_base_url: string | null;
  /** The origin of the back-office console's addresses (sign-in links); null means the service's own address. */
  backoffice_base_url: string | null;
  database_url: string | null;
  data_dir: string;
  master_key_base64: string | null;
  /** MASTER_KEY_PREVIOUS split at commas, each still base64 (the keys are checked where they are decoded). */
  master_key_previous_base64: string[];
  log_level: z.infer<typeof environmentSchema>['LOG_LEVEL'];
  accepts_test_mode: boolean;
  accepts_live_mode: boolean;
  api_enabled: boolean;
  worker_enabled: boolean;
  /** False: migrations are a separate step and a start only checks that the database has them all. */
  migrate_on_start: boolean;
  db_pool_size: number;
  /** How the connections reach PostgreSQL: their own sessions, or a transaction pooler's (src/platform/db.ts). */
  database_pooling: 'session' | 'transaction';
  worker_concurrency: number;
  worker_poll_interval_ms: number;
  /** The worker's LISTEN session's connection string; null on PGlite and when WORKER_LISTEN is off. */
  database_listen_url: string | null;
  shutdown_timeout_ms: number;
  production: boolean;
  slip_evidence_store: 'postgres' | 'filesystem' | 's3';
  /** Absolute or relative directory of the filesystem evidence store. */
  slip_evidence_dir: string;
  /** The S3 evidence store's settings; null unless SLIP_EVIDENCE_STORE=s3. */
  slip_evidence_s3: S3BlobStoreSettings | null;
  /** Days a slip image is kept; null keeps every image. */
  evidence_retention_days: number | null;
  /** The live verification provider; null when live bank checking is off. No trailing slash. */
  slip_verifier: { url: string; key: string; timeout_ms: number } | null;
  /** Each provider's base URL and resilience settings (the brands' credentials are in the database). */
  slip_providers: Record<'slipok' | 'easyslip' | 'rdcw', SlipProviderSettings>;
  /** Connections, timeouts and request bodies (docs/reliability.md, "Connections and request bodies"). */
  http: HttpLimits;
  /** How many slip uploads are read and stored at once, and how long one may queue or take. */
  slip_intake: SlipIntakeLimits;
}

export interface HttpLimits {
  max_connections: number;
  headers_timeout_ms: number;
  request_timeout_ms: number;
  keep_alive_timeout_ms: number;
  body_buffer_budget_bytes: number;
  body_deadline_ms: number;
  body_min_bytes_per_window: number;
  body_rate_window_ms: number;
}

export interface SlipIntakeLimits {
  concurrency: number;
  max_waiting: number;
  max_wait_ms: number;
  body_deadline_ms: number;
}

/** Node refuses a request timeout below the headers timeout; a slip must be able to queue and arrive within it. */
function httpLimitsOf(values: z.infer<typeof environmentSchema>): HttpLimits {
  if (values.HTTP_REQUEST_TIMEOUT_MS < values.HTTP_HEADERS_TIMEOUT_MS) {
    throw new Error('invalid configuration: HTTP_REQUEST_TIMEOUT_MS must not be below HTTP_HEADERS_TIMEOUT_MS');
  }
  if (values.HTTP_REQUEST_TIMEOUT_MS < values.SLIP_UPLOAD_MAX_WAIT_MS + values.SLIP_BODY_DEADLINE_MS) {
    throw new Error('invalid configuration: HTTP_REQUEST_TIMEOUT_MS must cover SLIP_UPLOAD_MAX_WAIT_MS plus SLIP_BODY_DEADLINE_MS');
  }
  return {
    max_connections: values.HTTP_MAX_CONNECTIONS,
    headers_timeout_ms: values.HTTP_HEADERS_TIMEOUT_MS,
    request_timeout_ms: values.HTTP_REQUEST_TIMEOUT_MS,
    keep_alive_timeout_ms: values.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    body_buffer_budget_bytes: values.HTTP_BODY_BUFFER_BYTES,
    body_deadline_ms: values.HTTP_BODY_DEADLINE_MS,
    body_min_bytes_per_window: values.HTTP_BODY_MIN_BYTES_PER_WINDOW,
    body_rate_window_ms: values.HTTP_BODY_RATE_WINDOW_MS,
  };
}

/** TRUSTED_PROXIES: a comma-separated list of IP addresses or CIDR ranges (`10.0.0.0/8`, `::1`). */
function trustedProxiesOf(text: string | undefined): string[] {
  if (text === undefined || text.trim() === '') return [];
  return text.split(',').map((entry) => {
    const item = entry.trim();
    const [address = '', prefix, extra] = item.split('/');
    const family = net.isIP(address);
    const prefixValid = prefix === undefined || (/^[0-9]{1,3}$/.test(prefix) && Number(prefix) <= (family === 6 ? 128 : 32));
    if (family === 0 || !prefixValid || extra !== undefined) throw new Error(`invalid configuration: TRUSTED_PROXIES entry "${item}" is not an IP address or CIDR range`);
    return item;
  });
}

/** A URL without its key, or a key without its URL, is a configuration error rather than a silent "off". */
function slipVerifierOf(values: z.infer<typeof environmentSchema>): Config['slip_verifier'] {
  if (values.SLIP_VERIFIER_URL === undefined && values.SLIP_VERIFIER_KEY === undefined) return null;
  if (values.SLIP_VERIFIER_URL === undefined || values.SLIP_VERIFIER_KEY === undefined) {
    throw new Error('invalid configuration: SLIP_VERIFIER_URL and SLIP_VERIFIER_KEY are set together or not at all');
  }
  return { url: values.SLIP_VERIFIER_URL.replace(/\/+$/, ''), key: values.SLIP_VERIFIER_KEY, timeout_ms: values.SLIP_VERIFIER_TIMEOUT_MS };
}

function providerSettingsOf(values: z.infer<typeof environmentSchema>, name: 'SLIPOK' | 'EASYSLIP' | 'RDCW'): SlipProviderSettings {
  const url = values[`SLIP_PROVIDER_${name}_URL`];
  return {
    url: url === undefined ? null : url.replace(/\/+$/, ''),
    timeout_ms: values[`SLIP_PROVIDER_${name}_TIMEOUT_MS`],
    max_attempts: values[`SLIP_PROVIDER_${name}_MAX_ATTEMPTS`],
    breaker_threshold: values[`SLIP_PROVIDER_${name}_BREAKER_THRESHOLD`],
    breaker_half_open_after_ms: values[`SLIP_PROVIDER_${name}_BREAKER_HALF_OPEN_MS`],
  };
}

/**
 * The checkout pages are served at the root of their origin (`/checkout/…`), so CHECKOUT_BASE_URL names
 * an origin: a path, query or credentials in it would give addresses the service does not serve.
 */
function checkoutBaseUrlOf(text: string | undefined, name = 'CHECKOUT_BASE_URL'): string | null {
  if (text === undefined) return null;
  const url = new URL(text);
  if (!['http:', 'https:'].includes(url.protocol) || url.username || url.password || url.search || url.hash || url.pathname !== '/') {
    throw new Error(`invalid configuration: ${name} must be an http(s) origin such as https://pay.example.com (no path, query or credentials)`);
  }
  return url.origin;
}

/** The S3 evidence store's settings: a bucket is required with it, and both halves of a static credential or neither. */
function slipEvidenceS3Of(values: z.infer<typeof environmentSchema>): S3BlobStoreSettings | null {
  if (values.SLIP_EVIDENCE_STORE !== 's3') return null;
  if (values.SLIP_EVIDENCE_S3_BUCKET === undefined) throw new Error('invalid configuration: SLIP_EVIDENCE_S3_BUCKET is required with SLIP_EVIDENCE_STORE=s3');
  const keyId = values.SLIP_EVIDENCE_S3_ACCESS_KEY_ID;
  const secret = values.SLIP_EVIDENCE_S3_SECRET_ACCESS_KEY;
  if ((keyId === undefined) !== (secret === undefined)) {
    throw new Error('invalid configuration: SLIP_EVIDENCE_S3_ACCESS_KEY_ID and SLIP_EVIDENCE_S3_SECRET_ACCESS_KEY are set together or not at all');
  }
  return {
    bucket: values.SLIP_EVIDENCE_S3_BUCKET,
    prefix: values.SLIP_EVIDENCE_S3_PREFIX,
    endpoint: values.SLIP_EVIDENCE_S3_ENDPOINT ?? null,
    region: values.SLIP_EVIDENCE_S3_REGION,
    force_path_style: values.SLIP_EVIDENCE_S3_FORCE_PATH_STYLE,
    credentials: keyId !== undefined && secret !== undefined ? { access_key_id: keyId, secret_access_key: secret } : null,
    timeout_ms: values.SLIP_EVIDENCE_S3_TIMEOUT_MS,
    max_attempts: values.SLIP_EVIDENCE_S3_MAX_ATTEMPTS,
  };
}

export function loadConfig(environment: NodeJS.ProcessEnv = process.env): Config {
  const parsed = environmentSchema.safeParse(environment);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`invalid configuration: ${problems.join('; ')}`);
  }
  const values = parsed.data;
  const modes = new Set(values.ACCEPTED_MODES.split(',').map((mode) => mode.trim()));
  for (const mode of modes) {
    if (mode !== 'test' && mode !== 'live') throw new Error(`invalid configuration: ACCEPTED_MODES has unknown mode "${mode}"`);
  }
  return {
    port: values.PORT,
    host: values.HOST,
    public_base_url: values.PUBLIC_BASE_URL ? values.PUBLIC_BASE_URL.replace(/\/+$/, '') : null,
    metrics_token: values.METRICS_TOKEN ?? null,
    trusted_proxies: trustedProxiesOf(values.TRUSTED_PROXIES),
    load_shedding: {
      ...DEFAULT_LOAD_SHEDDING,
      enabled: values.LOAD_SHEDDING,
      event_loop_delay_ms: values.LOAD_SHED_EVENT_LOOP_DELAY_MS,
      database_wait_ms: values.LOAD_SHED_DATABASE_WAIT_MS,
    },
    upload_base_url: values.UPLOAD_BASE_URL ? values.UPLOAD_BASE_URL.replace(/\/+$/, '') : null,
    checkout_base_url: checkoutBaseUrlOf(values.CHECKOUT_BASE_URL),
    // The console is served at /bo/ of its origin, so BACKOFFICE_BASE_URL names an origin as CHECKOUT_BASE_URL does.
    backoffice_base_url: checkoutBaseUrlOf(values.BACKOFFICE_BASE_URL, 'BACKOFFICE_BASE_URL'),
    database_url: values.DATABASE_URL ?? null,
    data_dir: values.DATA_DIR,
    master_key_base64: values.MASTER_KEY ?? null,
    master_key_previous_base64: (values.MASTER_KEY_PREVIOUS ?? '').split(',').map((key) => key.trim()).filter((key) => key !== ''),
    log_level: values.LOG_LEVEL,
    accepts_test_mode: modes.has('test'),
    accepts_live_mode: modes.has('live'),
    api_enabled: values.API_ENABLED,
    worker_enabled: values.WORKER_ENABLED,
    migrate_on_start: values.MIGRATE_ON_START,
    db_pool_size: values.DB_POOL_SIZE,
    database_pooling: values.DATABASE_POOLING,
    worker_concurrency: values.WORKER_CONCURRENCY,
    worker_poll_interval_ms: values.WORKER_POLL_INTERVAL_MS,
    database_listen_url: values.DATABASE_URL && values.WORKER_LISTEN ? (values.DATABASE_LISTEN_URL ?? values.DATABASE_URL) : null,
    shutdown_timeout_ms: values.SHUTDOWN_TIMEOUT_MS,
    production: values.NODE_ENV === 'production',
    slip_evidence_store: values.SLIP_EVIDENCE_STORE,
    slip_evidence_dir: values.SLIP_EVIDENCE_DIR ?? `${values.DATA_DIR.replace(/\/+$/, '')}/slips`,
    slip_evidence_s3: slipEvidenceS3Of(values),
    evidence_retention_days: values.EVIDENCE_RETENTION_DAYS ?? null,
    slip_verifier: slipVerifierOf(values),
    slip_providers: { slipok: providerSettingsOf(values, 'SLIPOK'), easyslip: providerSettingsOf(values, 'EASYSLIP'), rdcw: providerSettingsOf(values, 'RDCW') },
    http: httpLimitsOf(values),
    slip_intake: {
      concurrency: values.SLIP_UPLOAD_CONCURRENCY,
      max_waiting: values.SLIP_UPLOAD_MAX_WAITING,
      max_wait_ms: values.SLIP_UPLOAD_MAX_WAIT_MS,
      body_deadline_ms: values.SLIP_BODY_DEADLINE_MS,
    },
  };
}
