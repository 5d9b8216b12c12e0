import type { Clock } from '../platform/clock.ts';
import type { Config } from '../platform/config.ts';
import type { Queryable } from '../platform/db.ts';
import { ApiError, type Result } from '../platform/errors.ts';
import { formatTimestamp } from '../platform/time.ts';
import { CURRENT_API_VERSION } from '../platform/cause.ts';
import { findBank } from '../banks/service.ts';
import type { DepositService, DepositView } from '../deposits/service.ts';
import type { DepositStatus } from '../deposits/types.ts';
import { notPayableOptions } from '../deposits/transitions.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { SlipActivity } from '../slips/activity.ts';
import type { CheckoutAddresses } from './addresses.ts';
import { MAX_RECEIPTS_PER_ORDER } from '../slips/service.ts';
import type { SlipUpload } from '../slip-capability/capability.ts';
import type { SandboxBank } from '../sandbox/bank.ts';
import type { StoredResponse } from '../http/ports.ts';
import type { IdempotencyService } from '../idempotency/service.ts';
import { requestFingerprint } from '../platform/fingerprint.ts';
import { windowStart, type BucketPolicy, type BucketState } from '../http/rate-limit.ts';
import { checkoutPath, SESSION_LIFETIME_SECONDS, type CheckoutLinks, type CheckoutScope } from './links.ts';

/**
 * The hosted checkout (spec, "What the service does" §9): the page at `checkout_url` where the end user
 * sees where to transfer, pays, and uploads the slip. This service holds the logic without HTTP:
 * making and opening links, the page's view of its order, the upload capability the page asks for, and
 * the sandbox's simulated transfer. It reads and changes orders only through the deposit, slip, tenancy
 * and sandbox services, and owns no table: the link secrets are derived, never stored.
 */

/**
 * Requests of one payer's page, counted per order and client IP: a page polls at most every 3 seconds
 * and loads a handful of files, so 120 a minute is far above use and far below guessing anything.
 */
export const CHECKOUT_BUCKET: BucketPolicy = { name: 'checkout', limit: 120, window_seconds: 60, scope: 'user' };

/** A leg as the payer's page shows it: where to transfer, never the QR payload or a full account number. */
export interface CheckoutLeg {
  leg_ref: string;
  sequence: number;
  amount_minor: number;
  expires_at: string;
  leg_status: 'pending' | 'complete';
  /** The signed image of the leg's QR while the leg can be paid; null once it is paid or closed. */
  qr_image_url: string | null;
  receiver: { bank_code: string; bank_name_th: string; bank_name_en: string; account_number_masked: string; account_name_masked: string };
}

/** What the page at `checkout_url` knows about its order (GET …/status, and the page's first state). */
export interface CheckoutState {
  object: 'checkout';
  /** The service's clock: the page corrects the phone's clock by it for the countdown. */
  server_time: string;
  deposit_id: string;
  livemode: boolean;
  status: DepositStatus;
  is_terminal: boolean;
  version: number;
  amount_minor: number;
  currency: 'THB';
  expires_at: string;
  late_slip_accepted_until: string | null;
  legs: CheckoutLeg[];
  sender: { bank_code: string; bank_name_th: string; bank_name_en: string; account_number_masked: string; account_name_th_masked: string };
  slips: { uploaded: number; processing: boolean; uploads_left: number };
  /** Whether the page offers the slip upload now. */
  can_upload: boolean;
  /** Whether the page offers the sandbox's simulated transfer now (test mode only). */
  can_simulate: boolean;
  /** Whether the page offers the payer's cancel now: the order awaits payment and has no slip. */
  can_cancel: boolean;
  review: { reasons: { code: string; display_th: string; display_en: string; actionable_by: string }[] } | null;
  rejection: { display_th: string; display_en: string } | null;
  settlement: { amount_received_minor: number; partial: boolean } | null;
  /** Where the payer returns: the order's http(s) `return_url`, exactly as the merchant gave it. */
  return_url: string | null;
}

export interface OpenedLink {
  cookie: string;
  path: string;
  max_age_seconds: number;
  /** Whether the cookie is Secure: the order's checkout origin is https. */
  secure: boolean;
}

export interface CheckoutDependencies {
  clock: Clock;
  config: Config;
  tenancy: TenancyService;
  deposits: DepositService;
  /** Whether the order has slips, and whether one is being processed. */
  slip_activity: SlipActivity;
  sandboxBank: SandboxBank;
  idempotency: IdempotencyService;
  links: CheckoutLinks;
  /** Where each brand's checkout pages are served, and each order's `checkout_url`. */
  addresses: CheckoutAddresses;
  /** The service's own address: where QR images are served. */
  public_base_url: () => string;
  /** The base of slip upload addresses: the page's script sends the slip there. */
  upload_base_url: () => string;
}

export class CheckoutService {
  constructor(private readonly deps: CheckoutDependencies) {}

  /**
   * Opening `checkout_url`: a valid secret gives a session cookie for the order's checkout path. The
   * secret is checked before anything is read, so a wrong one costs no query. Null (404) for a wrong
   * secret or an order that does not exist in the brand.
   */
  async openLink(db: Queryable, white_label_id: string, deposit_id: string, secret: string): Promise<OpenedLink | null> {
    if (!this.deps.links.verifySecret(white_label_id, deposit_id, secret)) return null;
    const found = await this.deps.deposits.viewInBrand(db, white_label_id, deposit_id);
    if (!found) return null;
    const scope: CheckoutScope = { white_label_id, merchant_id: found.row.merchant_id, livemode: found.row.livemode, deposit_id };
    const expires = Math.floor(this.deps.clock.now().getTime() / 1000) + SESSION_LIFETIME_SECONDS;
    const origin = await this.deps.addresses.originFor(db, white_label_id);
    return {
      cookie: this.deps.links.session(scope, expires),
      path: checkoutPath(white_label_id, deposit_id),
      max_age_seconds: SESSION_LIFETIME_SECONDS,
      secure: origin.startsWith('https:'),
    };
  }

  /** The order a request's session cookie opens for this checkout path; null without a valid one. */
  openSession(white_label_id: string, deposit_id: string, cookies: readonly string[]): CheckoutScope | null {
    const now = this.deps.clock.now();
    for (const value of cookies.slice(0, 4)) {
      const scope = this.deps.links.openSession(white_label_id, deposit_id, value, now);
      if (scope) return scope;
    }
    return null;
  }

  /** Counts one request of a payer's page (per order and client IP) in the service's shared counters. */
  async countRequest(scope: CheckoutScope, client_ip: string): Promise<BucketState> {
    const now = this.deps.clock.now();
    const counted = await this.deps.tenancy.countInBucket({
      white_label_id: scope.white_label_id,
      bucket: CHECKOUT_BUCKET.name,
      subject: `${scope.deposit_id}:${client_ip}`,
      window_started_at: windowStart(now, CHECKOUT_BUCKET),
    });
    return { policy: CHECKOUT_BUCKET, count: counted.request_count, window_started_at: counted.window_started_at, now };
  }

  /** The page's view of its order; null when the session's order does not exist (404). */
  async state(db: Queryable, scope: CheckoutScope): Promise<CheckoutState | null> {
    const found = await this.deps.deposits.forCheckout(db, scope, scope.deposit_id);
    if (!found) return null;
    const { view } = found;
    const activity = await this.deps.slip_activity.activity(db, scope.white_label_id, scope.deposit_id);
    const now = this.deps.clock.now();
    const uploadsLeft = Math.max(0, MAX_RECEIPTS_PER_ORDER - activity.total);
    const processing = activity.unprocessed > 0;
    const pendingLeg = view.legs.some((leg) => leg.leg_status === 'pending');
    const windowOpen = typeof view.late_slip_accepted_until === 'string' && Date.parse(view.late_slip_accepted_until) > now.getTime();
    const takesSlips = (view.status === 'awaiting_payment' && pendingLeg) || ((view.status === 'expired' || view.status === 'canceled') && windowOpen && view.legs.length > 0);
    const senderBank = await findBank(db, view.sender.bank_code);
    const legs: CheckoutLeg[] = [];
    for (const leg of view.legs) {
      const bank = await findBank(db, leg.receiver.bank_code);
      legs.push({
        leg_ref: leg.leg_ref,
        sequence: leg.sequence,
        amount_minor: leg.amount_minor,
        expires_at: leg.expires_at,
        leg_status: leg.leg_status,
        qr_image_url: view.status === 'awaiting_payment' && leg.leg_status === 'pending' ? (leg.qr_image_url ?? null) : null,
        receiver: {
          bank_code: leg.receiver.bank_code,
          bank_name_th: leg.receiver.bank_name_th,
          bank_name_en: bank?.name_en ?? leg.receiver.bank_name_th,
          account_number_masked: leg.receiver.account_number_masked,
          account_name_masked: leg.receiver.account_name_masked,
        },
      });
    }
    return {
      object: 'checkout',
      server_time: formatTimestamp(now),
      deposit_id: view.id,
      livemode: view.livemode,
      status: view.status,
      is_terminal: view.is_terminal,
      version: view.version,
      amount_minor: view.amount_minor,
      currency: 'THB',
      expires_at: view.expires_at,
      late_slip_accepted_until: view.late_slip_accepted_until ?? null,
      legs,
      sender: {
        bank_code: view.sender.bank_code,
        bank_name_th: senderBank?.name_th ?? view.sender.bank_code,
        bank_name_en: senderBank?.name_en ?? view.sender.bank_code,
        account_number_masked: view.sender.account_number_masked,
        account_name_th_masked: view.sender.account_name_th_masked,
      },
      slips: { uploaded: activity.total, processing, uploads_left: uploadsLeft },
      can_upload: takesSlips && !processing && uploadsLeft > 0,
      can_simulate: !view.livemode && view.status === 'awaiting_payment' && pendingLeg && !processing && uploadsLeft > 0,
      can_cancel: view.status === 'awaiting_payment' && activity.total === 0,
      review: view.status === 'under_review' && view.review ? { reasons: view.review.reasons.map(reasonForPayer) } : null,
      rejection: view.rejection ? { display_th: view.rejection.display_th, display_en: view.rejection.display_en } : null,
      settlement: settlementForPayer(view),
      return_url: payerReturnUrl(found.return_url),
    };
  }

  /**
   * The order's slip upload capability for its page: the same capability POST …/slip-token issues to the
   * merchant, bound to the order's upload address and reservation. Null when the order does not exist;
   * `deposit_not_payable` while it cannot take a slip (waiting for liquidity, or closed).
   */
  async capability(db: Queryable, scope: CheckoutScope): Promise<Result<SlipUpload> | null> {
    return this.deps.deposits.issueSlipToken(db, scope, scope.deposit_id, CURRENT_API_VERSION);
  }

  /**
   * The sandbox's "simulate transfer": the sandbox bank transfers to the order's current leg (or the
   * one named) from the declared sender, exactly as POST /v1/test/bank/transfers does, and answers the
   * transfer with its slip image for the page to upload through the ordinary intake. Test mode only (a
   * live order answers 404), and only while the order awaits payment: a transfer made by mistake after
   * that would be a second real-looking payment. Idempotent by the page's key, so a retried click makes
   * one transfer.
   */
  async simulateTransfer(
    scope: CheckoutScope,
    input: { leg_ref?: string | undefined; idempotency_key: string; request_id: string; path: string; body: unknown },
  ): Promise<StoredResponse> {
    if (scope.livemode) throw new ApiError('resource_not_found');
    return this.deps.idempotency.execute(
      { white_label_id: scope.white_label_id, merchant_id: `checkout:${scope.deposit_id}`, livemode: scope.livemode, idempotency_key: input.idempotency_key },
      { fingerprint: requestFingerprint('POST', input.path, input.body), request_id: input.request_id },
      async (tx) => {
        const found = await this.deps.deposits.forCheckout(tx, scope, scope.deposit_id);
        if (!found) throw new ApiError('resource_not_found');
        if (found.view.status !== 'awaiting_payment') throw new ApiError('deposit_not_payable', notPayableOptions(found.view.status));
        const leg = input.leg_ref === undefined ? found.view.legs.find((candidate) => candidate.leg_status === 'pending') : found.view.legs.find((candidate) => candidate.leg_ref === input.leg_ref);
        if (!leg || leg.leg_status !== 'pending') {
          throw new ApiError('validation_error', { details: { fields: [{ path: 'leg_ref', reason: input.leg_ref === undefined ? 'no_pending_leg' : 'unknown_leg' }] } });
        }
        const made = await this.deps.sandboxBank.transfer(tx, scope, { deposit_id: scope.deposit_id, leg_ref: leg.leg_ref });
        if (!made) throw new ApiError('resource_not_found');
        if (!made.ok) throw made.error;
        return { status: 201, body: made.value, headers: { 'Cache-Control': 'no-store' } };
      },
    );
  }

  /**
   * The payer's cancel from the page: the order is canceled by `end_user` with `end_user_request` (spec,
   * `canceled_by` and `cancel_reason_code`) through the deposit service's one cancel, which refuses with 409
   * `deposit_not_cancelable` once a slip exists or the order no longer awaits payment. Idempotent by the page's
   * key, so a retried click cancels once and answers the same; the answer is the page's view of the order.
   */
  async cancel(scope: CheckoutScope, input: { idempotency_key: string; request_id: string; path: string; body: unknown }): Promise<StoredResponse> {
    return this.deps.idempotency.execute(
      { white_label_id: scope.white_label_id, merchant_id: `checkout:${scope.deposit_id}`, livemode: scope.livemode, idempotency_key: input.idempotency_key },
      { fingerprint: requestFingerprint('POST', input.path, input.body), request_id: input.request_id },
      async (tx) => {
        // The event names the page's request; the page's key is its own and is not the creation's key the spec means.
        const cause = { request_id: input.request_id, idempotency_key: null, api_version: CURRENT_API_VERSION };
        const canceled = await this.deps.deposits.cancel(tx, scope, scope.deposit_id, 'end_user', cause);
        if (!canceled) throw new ApiError('resource_not_found');
        if (!canceled.ok) throw canceled.error;
        const state = await this.state(tx, scope);
        if (!state) throw new ApiError('resource_not_found');
        return { status: 200, body: state, headers: { 'Cache-Control': 'no-store' } };
      },
    );
  }

  /**
   * The page's Content-Security-Policy: scripts, styles and fonts from the page's own origin only (no
   * inline script), images also from the service's own origin (the signed QR images), requests to the
   * page's origin and to the slip upload origin, no frames, no plugins, no form posts, and Trusted Types
   * enforced so that the script cannot write HTML from text.
   */
  contentSecurityPolicy(): string {
    const imageOrigins = new Set(["'self'", new URL(this.deps.public_base_url()).origin]);
    const connectOrigins = new Set(["'self'", new URL(this.deps.upload_base_url()).origin]);
    return [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self'",
      `img-src ${[...imageOrigins].join(' ')} blob:`,
      `connect-src ${[...connectOrigins].join(' ')}`,
      "font-src 'self'",
      "base-uri 'none'",
      "form-action 'none'",
      "frame-ancestors 'none'",
      "require-trusted-types-for 'script'",
      "trusted-types 'none'",
    ].join('; ');
  }
}

/** A review reason as the payer sees it: the spec's display texts, never the detail (it is for the merchant). */
function reasonForPayer(reason: { code: string; display_th: string; display_en: string; actionable_by: string }) {
  return { code: reason.code, display_th: reason.display_th, display_en: reason.display_en, actionable_by: reason.actionable_by };
}

function settlementForPayer(view: DepositView): CheckoutState['settlement'] {
  if (view.status !== 'settled' || view.amount_received_minor === undefined) return null;
  return { amount_received_minor: view.amount_received_minor, partial: view.partial === true };
}

/**
 * The order's `return_url` when it is an absolute http(s) URL (creation already refuses anything else;
 * this keeps a `javascript:` or `data:` address off the page whatever was stored). Used as given: the
 * merchant's own reference belongs in it, and the payer's outcome comes from the API, never from a URL.
 */
export function payerReturnUrl(stored: string | null): string | null {
  if (stored === null || !URL.canParse(stored)) return null;
  const protocol = new URL(stored).protocol;
  return protocol === 'https:' || protocol === 'http:' ? stored : null;
}
