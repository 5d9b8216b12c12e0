import type { Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import type { SecretBox } from '../platform/crypto.ts';
import type { EventsService } from '../events/service.ts';
import type { WithdrawalService } from '../withdrawals/service.ts';
import type { MatchingService } from '../matching/service.ts';
import type { LedgerService } from '../ledger/service.ts';
import type { FeeService, ScheduleReadAhead } from '../fees/service.ts';
import type { Payee } from '../beneficiaries/service.ts';
import type { SlipTokenSigner, SlipUpload } from '../slip-capability/capability.ts';
import type { DepositPolicyService } from './policy.ts';
import type { QrImageLinks } from './qr-image.ts';
import type { DepositScenariosFor } from './scenario-hooks.ts';
import type { DepositView } from './views.ts';
import type { ClaimsPort, DepositLegRow, DepositRow, FillPreference, ReviewObject } from './types.ts';

/** What the deposit module is given, and what it gives: the inputs and answers of its service. */

export interface CreateDepositInput {
  amount_minor: number;
  merchant_reference: string;
  end_user_ref: string;
  sender?: { bank_code: string; account_number: string; account_name_th: string; account_name_en?: string | undefined } | undefined;
  sender_id?: string | undefined;
  client?: { device_fingerprint?: string | undefined; ip?: string | undefined; user_agent?: string | undefined } | undefined;
  fill_preference?: FillPreference | undefined;
  min_ttl_seconds?: number | undefined;
  expires_in_seconds?: number | undefined;
  return_url?: string | undefined;
  metadata?: Record<string, string> | undefined;
}

export interface CreatedDeposit {
  deposit: DepositView;
  /** The capability to upload the slip: on the 201 path only. */
  slip_upload?: SlipUpload;
  /** 201 when matched at once, 202 when waiting for liquidity. */
  matched: boolean;
  retry_after_seconds?: number;
}

export interface DepositDependencies {
  events: EventsService;
  clock: Clock;
  secretBox: SecretBox;
  withdrawals: WithdrawalService;
  policies: DepositPolicyService;
  /** From `deriveAccountLookupKey(master_key)`: the HMAC key of account identities. */
  account_lookup_key: Buffer;
  matching: MatchingService;
  ledger: LedgerService;
  fees: FeeService;
  slip_tokens: SlipTokenSigner;
  qr_links: QrImageLinks;
  /** The service's own address, for `qr_image_url`. */
  public_base_url: () => string;
  /** The base of upload URLs (UPLOAD_BASE_URL, else the service's own address), read when a token is made. */
  upload_base_url: () => string;
  /** Opens claims inside this module's transactions (the review module owns them; see ClaimsPort). */
  claims: ClaimsPort;
  /** Where a test-mode order's sandbox scenario acts; live orders get hooks that do nothing. */
  scenarios: DepositScenariosFor;
  /** What slip intake holds of an order: cancel and expiry wait for, or refuse over, its receipts (src/slips/activity.ts). */
  slip_activity: SlipActivityProbe;
  /** A new review's estimated wait, from the review desk's pace (src/review/pace.ts). */
  review_estimate: ReviewEstimate;
  /** An order's `checkout_url` (src/checkout/addresses.ts). */
  checkout_links: CheckoutLinkProvider;
}

/**
 * What the slip pipeline's lock of an order read ahead for settling it (`DepositService.lockPaymentParties`),
 * for `SettlementService.settle` to use instead of a statement of its own: the deposit fee schedule.
 */
export interface SettlementReadAhead {
  deposit_fee_schedule: ScheduleReadAhead | null;
}

/** An order's payer and payees in full (see `DepositService.paymentParties`). */
export interface PaymentParties {
  order: DepositRow;
  sender: { bank_code: string; account_number: string; name_th: string; name_en: string | null; registered: boolean };
  legs: (DepositLegRow & { receiver: Payee | null })[];
  /** Reviews of orders at or above this amount need two approvers; null: never (brand policy). */
  four_eyes_min_amount_minor: number | null;
  /** Orders at or above this amount are held for review (POLICY_HOLD); null: no hold (brand policy). */
  policy_hold_min_amount_minor: number | null;
}

/**
 * The review desk's estimate of a new review's wait (`review.estimated_resolution_bucket`), from the orders
 * in review ahead of it (counted by this service, as the review opens, up to the number the estimate asks
 * for) and the desk's pace (the review module's `ReviewPace`, given to this service's constructor: it reads
 * only the desk's own decisions).
 */
export type ReviewEstimate = (
  db: Queryable,
  input: {
    white_label_id: string;
    livemode: boolean;
    four_eyes_required: boolean;
    escalated: boolean;
    /** The orders in review ahead of this one, counted up to `up_to`: past some number every estimate is the same. */
    count_in_review_up_to(up_to: number): Promise<number>;
  },
) => Promise<ReviewObject['estimated_resolution_bucket']>;

/** An order's hosted checkout link (`checkout_url`), from its brand's checkout origin, in the caller's transaction. */
export type CheckoutLinkProvider = (db: Queryable, order: { white_label_id: string; deposit_id: string }) => Promise<string>;

/** What slip intake holds of an order, asked by cancel and expiry (the slips module's `SlipActivity`). */
export type SlipActivityProbe = (db: Queryable, white_label_id: string, deposit_id: string) => Promise<{ total: number; unprocessed: number }>;
