import type { BalanceTransaction, Beneficiary, DepositOrder, Timestamp, WebhookSigningKey, WithdrawalOrder } from './resources.js';

/**
 * Events, as webhooks deliver them and GET /v1/pay/events lists them (spec, Events). The event `type`
 * is an open enum: a later version may send types this SDK does not know. So an event is a
 * `PaymentEvent`: either a `KnownEvent` (a discriminated union narrowed by `type`) or an `UnknownEvent`.
 * Narrow with `isKnownEvent` first; its false branch is the default branch the spec requires:
 *
 *   if (!isKnownEvent(event)) return; // a type from a later version: log it, answer 200
 *   switch (event.type) {
 *     case 'deposit.settled': event.data.object.credited_amount_minor; break; // a DepositOrder
 *     case 'balance.credited': event.data.object.amount_minor; break;        // a BalanceTransaction
 *     default: break;
 *   }
 *
 * Decide from `data.object.status`, never from `type` (spec): `type` only tells which object it carries.
 */

export interface EventAccount {
  merchant_id: string;
  white_label_id: string;
}

interface EnvelopeFields {
  id: string;
  object: 'event';
  api_version: string;
  livemode: boolean;
  created_at: Timestamp;
  /** Per merchant and environment, increasing; a temporary gap is normal, one older than 4 days a loss. */
  sequence: number;
  account: EventAccount;
  request?: { id?: string; idempotency_key?: string };
}

/** Only changed keys with their old values, plus the old `version`; null on `*.created`. */
export type PreviousAttributes<Item> = (Partial<Item> & { version: number }) | null;

/** An event about a versioned object: apply it only when `data.object.version` is higher than the stored one. */
export interface VersionedEvent<Type extends string, Item> extends EnvelopeFields {
  type: Type;
  data: { object: Item; previous_attributes: PreviousAttributes<Item> };
}

/** An event about an immutable object (no `version`, no `previous_attributes`): apply it once per object id. */
export interface ImmutableEvent<Type extends string, Item> extends EnvelopeFields {
  type: Type;
  data: { object: Item };
}

export const DEPOSIT_EVENT_TYPES = [
  'deposit.created',
  'deposit.matched',
  'deposit.slip_received',
  'deposit.settled',
  'deposit.under_review',
  'deposit.slip_rejected',
  'deposit.expired',
  'deposit.canceled',
  'deposit.reversed',
  'deposit.overpaid',
  'deposit.rejected',
  'deposit.review_updated',
  'deposit.leg_paid',
  'deposit.funds_held',
  'deposit.funds_released',
  // The late-slip window of an expired or canceled order closed: `is_terminal` turned true (issue 31).
  'deposit.closed',
] as const;

export const WITHDRAWAL_EVENT_TYPES = [
  'withdrawal.created',
  'withdrawal.approved',
  'withdrawal.rejected',
  'withdrawal.canceled',
  'withdrawal.expired',
  'withdrawal.filled',
  'withdrawal.fill_reversed',
  'withdrawal.leg_reserved',
  'withdrawal.leg_released',
  'withdrawal.disputed',
  'withdrawal.dispute_resolved',
] as const;

/**
 * The spec's three balance events, and the two credits the service names itself (docs/decisions/ledger.md):
 * `balance.released` (a withdrawal's reservation back to available) and `balance.adjusted` (an adjustment into
 * available). Fold them all by the movement's `direction` and `id`, never by the event's name.
 */
export const BALANCE_EVENT_TYPES = ['balance.credited', 'balance.cleared', 'balance.debited', 'balance.released', 'balance.adjusted'] as const;
export const BENEFICIARY_EVENT_TYPES = ['beneficiary.created', 'beneficiary.verified', 'beneficiary.verification_failed'] as const;
export const CLAIM_EVENT_TYPES = ['claim.created', 'claim.updated'] as const;

export type DepositEventType = (typeof DEPOSIT_EVENT_TYPES)[number];
export type WithdrawalEventType = (typeof WITHDRAWAL_EVENT_TYPES)[number];
export type BalanceEventType = (typeof BALANCE_EVENT_TYPES)[number];
export type BeneficiaryEventType = (typeof BENEFICIARY_EVENT_TYPES)[number];
export type ClaimEventType = (typeof CLAIM_EVENT_TYPES)[number];

/** A claim, as its events carry it (a merchant reads one with GET /v1/pay/claims/{id}). */
export interface Claim {
  id: string;
  object: 'claim';
  version: number;
  deposit_id: string;
  cause: 'same_transfer_excess' | 'additional_transfer' | 'late_slip' | (string & {});
  status: 'open' | 'investigating' | 'resolved' | 'rejected' | (string & {});
  amount_minor: number | null;
  slip_received_at: Timestamp;
  opened_by: string;
  resolution_code: string | null;
  resolved_at: Timestamp | null;
  /** The refund (a withdrawal order) that resolved the claim `refunded_in_service`; null otherwise. */
  refund_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  livemode: boolean;
}

/** The object of `webhook.key.rotating`: the new key switches in at `signing_switches_at`. */
export interface WebhookKeyRotation {
  object: 'webhook_key_rotation';
  id: string;
  livemode: boolean;
  new_key: WebhookSigningKey;
  previous_kid: string | null;
  signing_switches_at: Timestamp;
  previous_key_not_after: Timestamp | null;
}

/** The object of `webhook.endpoint.disabled`. */
export interface WebhookEndpoint {
  object: 'webhook_endpoint';
  id: string;
  /** The merchant's webhook receiving address (the spec's name). */
  deposit_url: string;
  /** The same address under its earlier name. */
  url: string;
  enabled: boolean;
  status: string;
  disabled_reason: string | null;
  version: number;
  livemode: boolean;
  [field: string]: unknown;
}

/**
 * A deposit as its events show it: `deposit.matched`, the only event carrying payment instructions, has the legs
 * with their receivers, `qr_payload` and `qr_image_url`; every other deposit event leaves `legs` out (read them
 * with GET /v1/pay/deposits/{id}).
 */
export type DepositEventObject<Type extends DepositEventType = DepositEventType> = Type extends 'deposit.matched' ? DepositOrder : Omit<DepositOrder, 'legs'>;
export type DepositEvent = { [Type in DepositEventType]: VersionedEvent<Type, DepositEventObject<Type>> }[DepositEventType];
export type WithdrawalEvent = { [Type in WithdrawalEventType]: VersionedEvent<Type, WithdrawalOrder> }[WithdrawalEventType];
export type BalanceEvent = { [Type in BalanceEventType]: ImmutableEvent<Type, BalanceTransaction> }[BalanceEventType];
export type BeneficiaryEvent = { [Type in BeneficiaryEventType]: VersionedEvent<Type, Beneficiary> }[BeneficiaryEventType];
export type ClaimEvent = { [Type in ClaimEventType]: VersionedEvent<Type, Claim> }[ClaimEventType];
export type KeyRotatingEvent = ImmutableEvent<'webhook.key.rotating', WebhookKeyRotation>;
export type EndpointDisabledEvent = VersionedEvent<'webhook.endpoint.disabled', WebhookEndpoint>;
/** Offline test vectors only: must not change any state. */
export type TestVectorEvent = ImmutableEvent<'webhook.test_vector', Record<string, unknown>>;

export type KnownEvent = DepositEvent | WithdrawalEvent | BalanceEvent | BeneficiaryEvent | ClaimEvent | KeyRotatingEvent | EndpointDisabledEvent | TestVectorEvent;
export type KnownEventType = KnownEvent['type'];

/** An event of a type this SDK does not know (the open enum's default branch). */
export interface UnknownEvent extends EnvelopeFields {
  type: string;
  data: { object: Record<string, unknown>; previous_attributes?: Record<string, unknown> | null };
}

export type PaymentEvent = KnownEvent | UnknownEvent;

export const KNOWN_EVENT_TYPES: ReadonlySet<string> = new Set<KnownEventType>([
  ...DEPOSIT_EVENT_TYPES,
  ...WITHDRAWAL_EVENT_TYPES,
  ...BALANCE_EVENT_TYPES,
  ...BENEFICIARY_EVENT_TYPES,
  ...CLAIM_EVENT_TYPES,
  'webhook.key.rotating',
  'webhook.endpoint.disabled',
  'webhook.test_vector',
]);

/** True for a type this SDK knows; the false branch is the spec's default branch for open enums. */
export function isKnownEvent(event: PaymentEvent): event is KnownEvent {
  return KNOWN_EVENT_TYPES.has(event.type);
}

/**
 * Checks the envelope fields every event carries (after the signature was verified, or on a feed page),
 * so that the code that follows can rely on them. Throws a TypeError naming the first bad field.
 */
export function assertEventEnvelope(value: unknown): asserts value is PaymentEvent {
  const event = value as Record<string, unknown> | null;
  const fail = (field: string) => {
    throw new TypeError(`not an event envelope: ${field}`);
  };
  if (event === null || typeof event !== 'object' || Array.isArray(event)) fail('not an object');
  if (typeof event!.id !== 'string' || event!.id.length === 0) fail('id');
  if (event!.object !== 'event') fail('object');
  if (typeof event!.type !== 'string') fail('type');
  if (typeof event!.livemode !== 'boolean') fail('livemode');
  if (typeof event!.sequence !== 'number' || !Number.isSafeInteger(event!.sequence)) fail('sequence');
  if (typeof event!.created_at !== 'string') fail('created_at');
  const data = event!.data as Record<string, unknown> | null | undefined;
  if (data === null || typeof data !== 'object' || data.object === null || typeof data.object !== 'object') fail('data.object');
}
