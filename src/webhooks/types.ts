import { DAY_MS, HOUR_MS, MINUTE_MS } from '../platform/time.ts';
import { ID_PREFIXES, newId } from '../platform/ids.ts';

/**
 * Constants, row types and views of the webhooks module. Each row type mirrors one table of
 * migrations/0008_webhooks.sql, column for column.
 */

/** The five event types an endpoint cannot turn off (spec, Events, "Delivery rules"). */
export const UNSUBSCRIBABLE_EVENT_TYPES = [
  'deposit.reversed',
  'withdrawal.fill_reversed',
  'balance.debited',
  'webhook.key.rotating',
  'webhook.endpoint.disabled',
] as const;

export const KEY_ROTATING_EVENT = 'webhook.key.rotating';
export const ENDPOINT_DISABLED_EVENT = 'webhook.endpoint.disabled';

/** Attempts per round (spec: X-PG-Attempt is 1 to 11). */
export const MAX_ATTEMPTS = 11;

/**
 * The fixed retry schedule: the wait after a failed attempt n (1 to 10) before attempt n + 1,
 * counted from the start of attempt n. The ten waits add up to exactly 92 hours 36 minutes:
 * 1 min, 5 min, 30 min, 1 h, 3 h, 6 h, 12 h, 20 h, 24 h, 26 h. The receiver's Retry-After is ignored.
 */
export const RETRY_DELAYS_MS: readonly number[] = [
  1 * MINUTE_MS,
  5 * MINUTE_MS,
  30 * MINUTE_MS,
  1 * HOUR_MS,
  3 * HOUR_MS,
  6 * HOUR_MS,
  12 * HOUR_MS,
  20 * HOUR_MS,
  24 * HOUR_MS,
  26 * HOUR_MS,
];

/** Answers that end a delivery as delivered (spec: 200, 201, 202, 204; no other 2xx). */
export const SUCCESS_STATUSES: ReadonlySet<number> = new Set([200, 201, 202, 204]);

/** Replays reach back this far (spec, Limits: "Replay of failed deliveries: last 72 hours"). */
export const REPLAY_WINDOW_MS = 3 * DAY_MS;
/** One replay request re-arms or creates at most this many deliveries. */
export const REPLAY_MAX_DELIVERIES = 10_000;
/** Endpoints per merchant and environment (a limit the spec does not give). */
export const MAX_ENDPOINTS_PER_FEED = 10;

export type EndpointStatus = 'enabled' | 'disabled' | 'deleted';
export type DisabledReason = 'operator' | 'endpoint_gone';
export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';
export type FailureReason = 'attempts_exhausted' | 'endpoint_gone' | 'endpoint_disabled' | 'endpoint_deleted';
export type AttemptStatus = 'succeeded' | 'failed' | 'lost';

/** One row of webhook_endpoints. */
export interface EndpointRow {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  endpoint_id: string;
  url: string;
  status: EndpointStatus;
  disabled_reason: DisabledReason | null;
  event_types: string[] | null;
  description: string | null;
  version: number;
  created_at: Date;
  updated_at: Date;
  disabled_at: Date | null;
  deleted_at: Date | null;
}

/** One row of webhook_signing_keys. */
export interface SigningKeyRow {
  /** '' for the live set (the platform's), the brand for a sandbox set. */
  white_label_id: string;
  /** The environment whose events the key signs (migration 0020). */
  livemode: boolean;
  kid: string;
  generation: number;
  alg: 'Ed25519';
  public_key_spki: string;
  raw_public_key: string;
  private_key_sealed: string;
  not_before: Date;
  not_after: Date | null;
  created_at: Date;
}

/** One row of webhook_deliveries. */
export interface DeliveryRow {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  delivery_id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  event_created_at: Date;
  status: DeliveryStatus;
  failure_reason: FailureReason | null;
  round: number;
  round_attempts: number;
  attempt_count: number;
  resend: boolean;
  resend_requested: boolean;
  next_attempt_at: Date | null;
  leased_by: string | null;
  lease_expires_at: Date | null;
  last_attempt_at: Date | null;
  last_http_status: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

/** One row of webhook_delivery_attempts. */
export interface AttemptRow {
  white_label_id: string;
  delivery_id: string;
  attempt_sequence: number;
  endpoint_id: string;
  event_id: string;
  round: number;
  attempt: number;
  resend: boolean;
  kid: string | null;
  status: AttemptStatus;
  http_status: number | null;
  error: string | null;
  started_at: Date;
  duration_ms: number | null;
  next_attempt_at: Date | null;
  created_at: Date;
}

/**
 * Ids of this module. The platform's id list (src/platform/ids.ts) has no webhook kinds yet, so these
 * reuse its pooled monotonic ULID source with the module's own prefixes.
 */
export const WEBHOOK_ID_PREFIXES = { endpoint: 'we_', delivery: 'whd_', signing_key: 'whk_' } as const;

export function newWebhookId(kind: keyof typeof WEBHOOK_ID_PREFIXES): string {
  return WEBHOOK_ID_PREFIXES[kind] + newId('job').slice(ID_PREFIXES.job.length);
}

const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;

export function isWebhookId(text: string, kind: keyof typeof WEBHOOK_ID_PREFIXES): boolean {
  const prefix = WEBHOOK_ID_PREFIXES[kind];
  return text.startsWith(prefix) && ULID_PATTERN.test(text.slice(prefix.length));
}

/** The next attempt's due time after a failed attempt n of a round, or null when n was the last. */
export function nextAttemptAfter(attempt_started_at: Date, attempt: number): Date | null {
  if (attempt >= MAX_ATTEMPTS) return null;
  const delay = RETRY_DELAYS_MS[attempt - 1];
  if (delay === undefined) throw new Error(`no retry delay after attempt ${attempt}`);
  return new Date(attempt_started_at.getTime() + delay);
}
