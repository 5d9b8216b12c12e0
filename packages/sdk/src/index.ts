/**
 * @payment-transfer/sdk: the merchant SDK of the payment transfer service. No runtime dependencies:
 * Node's own crypto (HMAC-SHA256, SHA-256, Ed25519) and fetch. See README.md.
 */
export { PaymentClient, AWAITS_A_CHANGE, encodeQuery, parseRetryAfter } from './client.js';
export type { ApiResponse, CallOptions, ClientOptions, QueryValue, RequestOptions, RetryNotice } from './client.js';
export { ApiError, ConnectionError, PaymentServiceError, UnexpectedResponseError, isApiError } from './errors.js';
export type { DetailsOf, ErrorCode, ErrorDetailsByCode, FieldProblem } from './errors.js';
export { API_VERSION, canonicalString, sha256Hex, signCanonicalString, signRequest, sortQuery } from './signing.js';
export type { CanonicalRequest, SignRequestInput } from './signing.js';
export {
  BALANCE_EVENT_TYPES,
  BENEFICIARY_EVENT_TYPES,
  CLAIM_EVENT_TYPES,
  DEPOSIT_EVENT_TYPES,
  KNOWN_EVENT_TYPES,
  WITHDRAWAL_EVENT_TYPES,
  assertEventEnvelope,
  isKnownEvent,
} from './events.js';
export type {
  BalanceEvent,
  BeneficiaryEvent,
  Claim,
  ClaimEvent,
  DepositEvent,
  DepositEventObject,
  EndpointDisabledEvent,
  EventAccount,
  ImmutableEvent,
  KeyRotatingEvent,
  KnownEvent,
  KnownEventType,
  PaymentEvent,
  PreviousAttributes,
  TestVectorEvent,
  UnknownEvent,
  VersionedEvent,
  WebhookEndpoint,
  WebhookKeyRotation,
  WithdrawalEvent,
} from './events.js';
export {
  KEY_CACHE_MAX_AGE_MS,
  SIGNATURE_TOLERANCE_SECONDS,
  SigningKeyCache,
  UNKNOWN_KID_REFETCH_INTERVAL_MS,
  WebhookVerificationError,
  WebhookVerifier,
  parseSignatureHeader,
  signedPayload,
  signingKeysFrom,
} from './webhooks.js';
export type { FetchSigningKeys, HeaderSource, ParsedSignatureHeader, WebhookFailureReason, WebhookVerifierOptions } from './webhooks.js';
export { MemoryEventStore, SEEN_RETENTION_MS, applyEvent, objectKeyOf } from './store.js';
export type { ApplyOutcome, EventStore, ObjectKey, StoredObject } from './store.js';
export { GAP_LOSS_AFTER_MS, reconcile } from './reconcile.js';
export type { ReconcileOptions, ReconcileResult, SequenceGap } from './reconcile.js';
export * from './resources.js';
