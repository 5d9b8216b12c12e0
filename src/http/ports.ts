import type { Counter, Gauge, Histogram } from 'prom-client';
import type { Clock, TestClockScope } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import type { Logger } from '../platform/logger.ts';
import type { HttpLimits } from '../platform/config.ts';
import type { BackofficeRole } from '../platform/access.ts';
import type { ReadPart } from '../platform/read-part.ts';
import type { LoadGate } from './load-gate.ts';

/**
 * What the HTTP layer needs from the rest of the service, as small ports that the modules above it
 * implement and the composition root (src/app.ts) hands to `buildServer`. The layer imports no business
 * module: who a caller is (tenancy), whether a request runs idempotently (idempotency), which test clock a
 * sandbox request lives in (test-clocks), what an order's slip capability says (slips) and whether the
 * process sheds load (ops) all arrive through these interfaces.
 */

/** An integration key as the pipeline needs it: its account, its scopes and its signing secret. */
export interface ResolvedApiKey {
  white_label_id: string;
  merchant_id: string;
  api_key_id: string;
  livemode: boolean;
  scopes: ReadonlySet<string>;
  signing_secret: string;
}

export interface ResolvedBackofficeCredential {
  credential_id: string;
  white_label_id: string | null;
  role: BackofficeRole;
  status: 'active' | 'suspended' | 'revoked';
  brand_status: 'active' | 'suspended' | null;
}

export interface AdmissionBucket {
  bucket: string;
  subject: string;
  window_started_at: Date;
}

/** One signed request's admission: its nonce, its buckets and its key chain, in one statement. */
export interface AdmissionRequest {
  white_label_id: string;
  merchant_id: string;
  api_key_id: string;
  nonce: string;
  nonce_expires_at: Date;
  now: Date;
  bucket: string;
  subject: string;
  window_started_at: Date;
  /** The key bucket's limit: past it, the further buckets are not counted. */
  key_limit: number;
  /** Whether the key holds the route's scope (checked by the caller from the key it resolved). */
  scope_granted: boolean;
  /**
   * The key's backoff (src/http/rate-limit.ts, KEY_BACKOFF): the counter row it is kept in, the key bucket's
   * count past which it starts, how long it lasts, and how many requests during it are tolerated before it
   * starts again.
   */
  backoff: { bucket: string; start_above_count: number; seconds: number; tolerated: number };
  extra_buckets: readonly AdmissionBucket[];
  attachments: readonly ReadPart<unknown>[];
}

/** What one merchant request learns about its key chain, its nonce and its rate buckets in one round trip. */
export interface RequestAdmission {
  key_status: 'active' | 'suspended' | 'revoked';
  merchant_status: 'active' | 'suspended';
  brand_status: 'active' | 'suspended';
  nonce_fresh: boolean;
  request_count: number;
  window_started_at: Date;
  /** When the key's current backoff started, if the key is in one after this request; null otherwise. */
  backoff_started_at: Date | null;
  /** The request's further buckets, in the order asked; null where the request was not counted in them. */
  extra_counts: ({ request_count: number; window_started_at: Date } | null)[];
  /** The values of the carried reads (src/platform/read-part.ts), in the order asked, as their owners parse them. */
  attachments: unknown[];
}

export interface BucketCount {
  request_count: number;
  window_started_at: Date;
}

/** Who is calling, and how often (the tenancy module). */
export interface CallerDirectory {
  resolveApiKey(apiKey: string): Promise<ResolvedApiKey | null>;
  admitSignedRequest(input: AdmissionRequest): Promise<RequestAdmission | null>;
  resolveBackofficeToken(token: string): Promise<ResolvedBackofficeCredential | null>;
  countInBucket(input: { white_label_id: string; bucket: string; subject: string; window_started_at: Date }): Promise<BucketCount>;
}

/** A stored or fresh answer of an idempotent write. */
export interface StoredResponse {
  status: number;
  /** Exact JSON text sent to the client and replayed byte for byte. */
  body_text: string;
  /** Headers the route set on the first answer (Location, Cache-Control, …), replayed with it. */
  headers: Record<string, string>;
  replayed: boolean;
}

export interface IdempotencyScope {
  white_label_id: string;
  /** The merchant, or another owner of the key space (an order's capability, a back-office credential). */
  merchant_id: string;
  livemode: boolean;
  idempotency_key: string;
}

/** Runs a write once per key and replays its answer (the idempotency module). */
export interface IdempotentExecution {
  execute(
    scope: IdempotencyScope,
    input: { fingerprint: string; request_id: string },
    /** Runs the write; `answers` are what `reads` answered, parsed by their parts, in their order. */
    handler: (tx: Queryable, answers: readonly unknown[]) => Promise<{ status: number; body: unknown; headers?: Record<string, string> }>,
    /** The write's first reads (a planned command's, src/platform/read-part.ts), carried by the key's statement. */
    reads?: readonly ReadPart<unknown>[],
  ): Promise<StoredResponse>;
}

/** A sandbox test clock attached to a merchant's account, as its requests run in it. */
export interface AttachedClock {
  scope: TestClockScope;
  /** True while the clock advances: writes wait for it (409 test_clock_advancing). */
  advancing: boolean;
}

/** Which test clock a sandbox request lives in (the test-clocks module); live requests never have one. */
export interface TestClockScopes {
  attachedScopePart(account: { white_label_id: string; merchant_id: string; livemode: boolean }): ReadPart<AttachedClock | null> | null;
  scopeOfCapability(db: Queryable, token: string, deposit_id: string): Promise<TestClockScope | null>;
}

/** What the pipeline itself reads of a verified capability: its brand and its rate subject. */
export interface CapabilityClaims {
  readonly wl: string;
  readonly rate_subject: string;
}

/** An order's slip capability (the slips module): verified against the exact address it was sent to. */
export interface CapabilityVerifier {
  /** Longer bearer tokens are refused before any work. */
  readonly max_token_length: number;
  verify(token: string, expected: { url: string; deposit_id: string; now: Date }): { ok: true; claims: CapabilityClaims } | { ok: false; reason: string };
}

/** The metrics the HTTP layer keeps (registered by src/ops/metrics.ts). */
export interface HttpMetrics {
  http_requests_total: Counter<'method' | 'route' | 'status'>;
  http_request_duration_seconds: Histogram<'method' | 'route'>;
  http_requests_shed_total: Counter<'load_class'>;
  http_connections_open: Gauge;
  http_connections_refused_total: Counter;
  http_request_bodies_refused_total: Counter<'reason'>;
  http_request_body_buffer_bytes: Gauge;
}

/** Everything `buildServer` is given. */
export interface ServerDependencies {
  config: { trusted_proxies: string[]; http: HttpLimits; accepts_live_mode: boolean; accepts_test_mode: boolean };
  logger: Logger;
  metrics: HttpMetrics;
  clock: Clock;
  /** Where a GET handler reads, and a capability's test clock is looked up. */
  database: Queryable;
  callers: CallerDirectory;
  idempotency: IdempotentExecution;
  loadGate: LoadGate;
  testClocks: TestClockScopes;
  capabilities: CapabilityVerifier;
  /** The base of slip upload addresses: its scheme is the one a capability names. */
  uploadBaseUrl(): string;
}

