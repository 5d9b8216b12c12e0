import type { Clock } from '../platform/clock.ts';
import { Rollback, type Database, type Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { fail, ok, type Result } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { formatNullableTimestamp, formatTimestamp } from '../platform/time.ts';
import { computePreviousAttributes } from '../events/envelope.ts';
import { CURRENT_API_VERSION } from '../platform/cause.ts';
import type { EventsService } from '../events/service.ts';
import type { EventCause } from '../platform/cause.ts';
import type { Actor, BackofficeRole } from '../platform/access.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { RefundService } from '../refunds/service.ts';
import { FINAL_WITHDRAWAL_STATUSES, type RefundReasonCode, type WithdrawalView } from '../withdrawals/service.ts';
import { additionalTransferClaimKey, type DepositService } from '../deposits/service.ts';
import type {
  ClaimCause,
  ClaimRecord,
  ClaimsPort,
  ClaimStatus,
  DepositAccount,
  LateSlipClaimEvidence,
  OpenClaimInput,
} from '../deposits/types.ts';
import * as repository from './claims-repository.ts';
import { REFUNDED_IN_SERVICE, type ClaimResolutionCode, type ClaimRow } from './claims-repository.ts';

/**
 * Claims (issue 11, item 5): money that arrived beyond what an order accepted, or a transfer whose slip
 * came after the late-slip window. Nothing is refunded automatically; back-office staff investigate a
 * claim and resolve it with an outcome (`resolution_code`), or reject it.
 *
 * Two parts, so that "a module calls another module's service, never its tables" holds without an
 * import cycle:
 * - `ClaimRegistry` implements the deposit module's `ClaimsPort`. The deposit service opens claims through
 *   it inside its own transactions (settlement's excess, a transfer after settlement, a late slip at
 *   `claim_url`); it needs nothing from the deposit module, so it is built before it (src/app.ts).
 * - `ClaimService`, the claim desk: the back office opens, lists, reads and decides claims, and a
 *   merchant reads its own. It asks `DepositService` for deposit facts and locks, and opens late-slip
 *   claims through `DepositService.openLateSlipClaim`, so that the window rule is written once for both
 *   doors (the end user's `claim_url` and POST /v1/bo/claims).
 *
 * Every change of a claim writes its event on the merchant's feed (`claim.created`, `claim.updated`,
 * carrying the merchant's view, never the internal note) in the transaction of the change, and every
 * back-office change writes its audit row there too.
 */

/**
 * Who may do what with claims, the one rule for the API (claim-routes.ts) and the console's pages. Everyone in the
 * back office reads claims and opens them for a payer (a reviewer meets late slips too). Deciding a claim is the
 * operators' (and the platform administrator's): its outcome is money handed back (a refund to the payer, outside
 * the service or through it, a credit by the merchant), which is brand administration, while reviewers decide
 * payments inside it.
 */
export const CLAIM_READ_ROLES = ['platform_admin', 'operator', 'reviewer'] as const satisfies readonly BackofficeRole[];
export const CLAIM_DECIDE_ROLES = ['platform_admin', 'operator'] as const satisfies readonly BackofficeRole[];

export type ClaimOpenedBy = { type: 'end_user'; credential_id: null } | { type: 'backoffice'; credential_id: string } | { type: 'system'; credential_id: null };

/** A claim as the back office reads it: everything, the internal note included. */
export interface BackofficeClaimView {
  id: string;
  object: 'claim';
  white_label_id: string;
  merchant_id: string;
  deposit_id: string;
  livemode: boolean;
  cause: ClaimCause;
  status: ClaimStatus;
  version: number;
  amount_minor: number | null;
  slip_received_at: string;
  evidence: LateSlipClaimEvidence | null;
  opened_by: ClaimOpenedBy;
  investigated_by: string | null;
  investigated_at: string | null;
  resolution_code: ClaimResolutionCode | null;
  /** Internal: the decider's reason. Never in a merchant's view or event. */
  resolution_note: string | null;
  resolved_by: string | null;
  resolved_at: string | null;
  /** The refund of the service that resolved the claim (`resolution_code` `refunded_in_service`), else null. */
  refund_id: string | null;
  created_at: string;
  updated_at: string;
}

/**
 * A claim as its merchant reads it (GET /v1/pay/claims/{id}) and as `claim.*` events carry it: the
 * outcome, never the internal note, the payer's evidence or which staff member decided.
 */
export interface MerchantClaimView {
  id: string;
  object: 'claim';
  version: number;
  deposit_id: string;
  cause: ClaimCause;
  status: ClaimStatus;
  amount_minor: number | null;
  slip_received_at: string;
  opened_by: ClaimOpenedBy['type'];
  resolution_code: ClaimResolutionCode | null;
  resolved_at: string | null;
  /** The refund (a withdrawal order the merchant reads) that resolved the claim, else null. */
  refund_id: string | null;
  created_at: string;
  updated_at: string;
  livemode: boolean;
}

/** The back-office staff member acting, and the request they act in. */
export interface ClaimStaff {
  actor: Actor;
  credential_id: string;
  request_id: string;
  idempotency_key: string | null;
}

/** POST /v1/bo/claims: a transfer a payer reports, after the late-slip window or after settlement. */
export interface ClaimOpening {
  deposit_id: string;
  cause: 'late_slip' | 'additional_transfer';
  /** What the payer says they sent; required for a transfer after settlement. */
  amount_minor: number | null;
  /** The transfer as the payer describes it; a transfer after settlement names its `trans_ref`. */
  evidence: Omit<LateSlipClaimEvidence, 'amount_minor'>;
}

/**
 * How a claim resolved `refunded_in_service` gets its refund: a new refund of the claim's deposit, made in the
 * decision's transaction, or one that already exists (made by the merchant or an operator), linked.
 */
export type ClaimRefund =
  | { action: 'create'; amount_minor: number; reason_code: RefundReasonCode; note: string | null }
  | { action: 'link'; refund_id: string };

export type ClaimDecision =
  | { action: 'investigate' }
  | { action: 'resolve'; resolution_code: ClaimResolutionCode; note: string; refund: ClaimRefund | null }
  | { action: 'reject'; note: string };

/** From which statuses each decision may be taken (the claim's life cycle). */
const DECIDABLE_FROM: Record<ClaimDecision['action'], readonly ClaimStatus[]> = {
  investigate: ['open'],
  resolve: ['open', 'investigating'],
  reject: ['open', 'investigating'],
};

const AUDIT_ACTION_OF: Record<ClaimDecision['action'], string> = {
  investigate: 'claim.investigation_started',
  resolve: 'claim.resolved',
  reject: 'claim.rejected',
};

function openedByOf(row: ClaimRow): ClaimOpenedBy {
  if (row.opened_by === 'backoffice') {
    invariant(row.opened_by_id, 'a claim opened in the back office names the credential');
    return { type: 'backoffice', credential_id: row.opened_by_id };
  }
  return { type: row.opened_by, credential_id: null };
}

export function backofficeClaimView(row: ClaimRow): BackofficeClaimView {
  return {
    id: row.claim_id,
    object: 'claim',
    white_label_id: row.white_label_id,
    merchant_id: row.merchant_id,
    deposit_id: row.deposit_id,
    livemode: row.livemode,
    cause: row.cause,
    status: row.status,
    version: row.version,
    amount_minor: row.amount_minor,
    slip_received_at: formatTimestamp(row.slip_received_at),
    evidence: row.evidence,
    opened_by: openedByOf(row),
    investigated_by: row.investigated_by,
    investigated_at: formatNullableTimestamp(row.investigated_at),
    resolution_code: row.resolution_code,
    resolution_note: row.resolution_note,
    resolved_by: row.resolved_by,
    resolved_at: formatNullableTimestamp(row.resolved_at),
    refund_id: row.refund_id,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
  };
}

export function merchantClaimView(row: ClaimRow): MerchantClaimView {
  return {
    id: row.claim_id,
    object: 'claim',
    version: row.version,
    deposit_id: row.deposit_id,
    cause: row.cause,
    status: row.status,
    amount_minor: row.amount_minor,
    slip_received_at: formatTimestamp(row.slip_received_at),
    opened_by: row.opened_by,
    resolution_code: row.resolution_code,
    resolved_at: formatNullableTimestamp(row.resolved_at),
    refund_id: row.refund_id,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    livemode: row.livemode,
  };
}

function recordOf(row: ClaimRow): ClaimRecord {
  return {
    white_label_id: row.white_label_id,
    merchant_id: row.merchant_id,
    livemode: row.livemode,
    claim_id: row.claim_id,
    deposit_id: row.deposit_id,
    cause: row.cause,
    amount_minor: row.amount_minor,
    slip_received_at: row.slip_received_at,
    status: row.status,
    created_at: row.created_at,
  };
}

function causeOf(staff: ClaimStaff): EventCause {
  return { request_id: staff.request_id, idempotency_key: staff.idempotency_key, api_version: CURRENT_API_VERSION };
}

/**
 * The claims port the deposit module calls inside its transactions: a claim is written once per
 * `dedupe_key` (the unique key of the table decides, whatever the timing), with its `claim.created` event.
 */
export class ClaimRegistry implements ClaimsPort {
  constructor(private readonly deps: { clock: Clock; events: EventsService }) {}

  async open(tx: Queryable, input: OpenClaimInput): Promise<{ claim: ClaimRecord; created: boolean }> {
    invariant(input.amount_minor === null || (Number.isSafeInteger(input.amount_minor) && input.amount_minor > 0), 'a claimed amount is a positive number of satang');
    invariant(input.cause === 'late_slip' || input.amount_minor !== null, 'an excess or a transfer after settlement has its amount');
    const now = this.deps.clock.now();
    const opener = input.opened_by;
    const inserted = await repository.insertClaim(tx, {
      white_label_id: input.white_label_id,
      merchant_id: input.merchant_id,
      livemode: input.livemode,
      claim_id: newId('claim'),
      deposit_id: input.deposit_id,
      cause: input.cause,
      amount_minor: input.amount_minor,
      slip_received_at: input.slip_received_at,
      status: 'open',
      dedupe_key: input.dedupe_key,
      evidence: input.evidence,
      opened_by: opener.type,
      opened_by_id: opener.type === 'backoffice' ? opener.credential_id : null,
      version: 1,
      investigated_by: null,
      investigated_at: null,
      resolution_code: null,
      resolution_note: null,
      resolved_by: null,
      resolved_at: null,
      refund_id: null,
      created_at: now,
      updated_at: now,
    });
    if (!inserted) {
      const existing = await repository.findByDedupeKey(tx, input.white_label_id, input.dedupe_key);
      invariant(existing, 'a claim that conflicts on its key exists');
      return { claim: recordOf(existing), created: false };
    }
    await this.deps.events.emitEvent(tx, {
      white_label_id: inserted.white_label_id,
      merchant_id: inserted.merchant_id,
      livemode: inserted.livemode,
      type: 'claim.created',
      object: { ...merchantClaimView(inserted) },
      previous_attributes: null,
      cause: input.cause_of_event,
    });
    return { claim: recordOf(inserted), created: true };
  }
}

export interface ClaimDependencies {
  database: Database;
  clock: Clock;
  deposits: DepositService;
  tenancy: TenancyService;
  events: EventsService;
  registry: ClaimRegistry;
  /** Makes the refund of a claim resolved `refunded_in_service`, in the decision's transaction. */
  refunds: RefundService;
}

/** The claim desk: the back office's claims, and a merchant's read of its own. */
export class ClaimService {
  readonly registry: ClaimRegistry;

  constructor(private readonly deps: ClaimDependencies) {
    this.registry = deps.registry;
  }

  /**
   * POST /v1/bo/claims, in one transaction: a late slip through the deposit service (an expired or
   * canceled order whose window has closed or never existed; `late_slip_window_open` inside it), or a
   * transfer after settlement reported for a settled order (`deposit_state_conflict` otherwise). A
   * reported transfer changes nothing on the order: `deposit.overpaid` and `overpayment` stay for
   * transfers the bank verified. The same transfer, or the same request repeated, returns the claim it
   * opened (`created` false). Another brand's order is `resource_not_found`.
   */
  open(white_label_id: string, opening: ClaimOpening, staff: ClaimStaff): Promise<Result<{ claim: BackofficeClaimView; created: boolean }>> {
    return this.deps.database.transaction(async (tx) => {
      const opened_by = { type: 'backoffice', credential_id: staff.credential_id } as const;
      let claim: { claim_id: string; created: boolean };
      if (opening.cause === 'late_slip') {
        const evidence: LateSlipClaimEvidence = { ...opening.evidence, ...(opening.amount_minor === null ? {} : { amount_minor: opening.amount_minor }) };
        const opened = await this.deps.deposits.openLateSlipClaim(tx, { white_label_id, deposit_id: opening.deposit_id, livemode: null, evidence, opened_by, cause: causeOf(staff) });
        if (!opened) return fail('resource_not_found');
        if (!opened.ok) return { ok: false, error: opened.error };
        claim = { claim_id: opened.value.claim.id, created: opened.value.created };
      } else {
        const reported = await this.openReportedTransfer(tx, white_label_id, opening, staff);
        if (!reported.ok) return reported;
        claim = reported.value;
      }
      const row = await repository.findClaim(tx, white_label_id, claim.claim_id);
      invariant(row, 'the claim just opened or found exists');
      if (claim.created) {
        await this.deps.tenancy.audit(tx, staff.actor, white_label_id, 'claim.opened', 'claim', row.claim_id, { deposit_id: row.deposit_id, cause: row.cause, amount_minor: row.amount_minor });
      }
      return ok({ claim: backofficeClaimView(row), created: claim.created });
    });
  }

  /**
   * A transfer after settlement that the payer reports to staff (the slip pipeline could not take it: the
   * order's three uploads are used, or its capability has expired). If the bank already verified that
   * transfer for this order, its claim is the answer.
   */
  private async openReportedTransfer(tx: Queryable, white_label_id: string, opening: ClaimOpening, staff: ClaimStaff): Promise<Result<{ claim_id: string; created: boolean }>> {
    const trans_ref = opening.evidence.trans_ref;
    invariant(opening.amount_minor !== null && trans_ref !== undefined, 'a reported transfer after settlement names its amount and reference');
    // The order's lock (and its feeds', as every deposit change) orders this against a reversal.
    const deposit = await this.deps.deposits.lockOrder(tx, white_label_id, opening.deposit_id);
    if (!deposit) return fail('resource_not_found');
    if (deposit.status !== 'settled') return fail('deposit_state_conflict', { details: { status: deposit.status } });
    const reference = trans_ref.toUpperCase();
    if (opening.evidence.sending_bank_code !== undefined) {
      const verified = await repository.findByDedupeKey(tx, white_label_id, additionalTransferClaimKey(deposit.deposit_id, `${opening.evidence.sending_bank_code}:${reference}`));
      if (verified) return ok({ claim_id: verified.claim_id, created: false });
    }
    const opened = await this.deps.registry.open(tx, {
      white_label_id,
      merchant_id: deposit.merchant_id,
      livemode: deposit.livemode,
      deposit_id: deposit.deposit_id,
      cause: 'additional_transfer',
      amount_minor: opening.amount_minor,
      slip_received_at: this.deps.clock.now(),
      // Its own key space: a reported transfer is not the bank-verified one, whose claim flags the order.
      dedupe_key: `additional_transfer:${deposit.deposit_id}:reported:${reference}`,
      evidence: { ...opening.evidence, amount_minor: opening.amount_minor },
      opened_by: { type: 'backoffice', credential_id: staff.credential_id },
      cause_of_event: causeOf(staff),
    });
    return ok({ claim_id: opened.claim.claim_id, created: opened.created });
  }

  /** A page of the brand's claims, oldest first; one more than asked when there is a next page. */
  /** Which of these orders have a claim still to decide: the evidence retention keeps their slips (src/slips/retention.ts). */
  ordersWithOpenClaims(db: Queryable, orders: readonly { white_label_id: string; deposit_id: string }[]): Promise<{ white_label_id: string; deposit_id: string }[]> {
    return repository.ordersWithOpenClaims(db, orders);
  }

  async list(db: Queryable, white_label_id: string, filters: repository.ClaimListFilters): Promise<BackofficeClaimView[]> {
    return (await repository.listClaims(db, white_label_id, filters)).map(backofficeClaimView);
  }

  async get(db: Queryable, white_label_id: string, claim_id: string): Promise<BackofficeClaimView | null> {
    const row = await repository.findClaim(db, white_label_id, claim_id);
    return row ? backofficeClaimView(row) : null;
  }

  /** GET /v1/pay/claims/{id}: the merchant's own claim in its environment; null for anyone else's. */
  async getForMerchant(db: Queryable, account: DepositAccount, claim_id: string): Promise<MerchantClaimView | null> {
    const row = await repository.findMerchantClaim(db, account, claim_id);
    return row ? merchantClaimView(row) : null;
  }

  /**
   * One decision on a claim, in one transaction with its event and audit row. The claim row is locked
   * first, so two deciders queue and the second reads the first one's outcome: it gets
   * `claim_state_conflict`, unless it is the same staff member repeating the same decision, who gets the
   * claim back unchanged (`replayed`). A resolution `refunded_in_service` makes (or links) its refund in the
   * same transaction; a refusal of the refund rolls everything back and is the answer, the claim unchanged.
   */
  async decide(white_label_id: string, claim_id: string, staff: ClaimStaff, decision: ClaimDecision): Promise<Result<{ claim: BackofficeClaimView; replayed: boolean }>> {
    invariant(decision.action !== 'resolve' || (decision.resolution_code === REFUNDED_IN_SERVICE) === (decision.refund !== null), 'a refund comes exactly with refunded_in_service');
    try {
      return await this.deps.database.transaction((tx) => this.decideIn(tx, white_label_id, claim_id, staff, decision));
    } catch (error) {
      // The refund's refusal, after the refund's first writes (its payee, perhaps): nothing of the decision stays.
      if (error instanceof Rollback) return error.value as Result<never>;
      throw error;
    }
  }

  private async decideIn(tx: Queryable, white_label_id: string, claim_id: string, staff: ClaimStaff, decision: ClaimDecision): Promise<Result<{ claim: BackofficeClaimView; replayed: boolean }>> {
    const row = await repository.lockClaim(tx, white_label_id, claim_id);
    if (!row) return fail('resource_not_found');
    if (sameDecisionRepeated(row, staff, decision)) return ok({ claim: backofficeClaimView(row), replayed: true });
    if (!DECIDABLE_FROM[decision.action].includes(row.status)) {
      return fail('claim_state_conflict', { details: { claim_id: row.claim_id, status: row.status } });
    }
    let refund_id: string | null = null;
    if (decision.action === 'resolve' && decision.refund !== null) {
      const refund = await this.refundOf(tx, row, decision.refund, staff);
      if (!refund.ok) throw new Rollback(refund);
      refund_id = refund.value.id;
    }
    const after = decidedRow(row, staff, decision, this.deps.clock.now(), refund_id);
    invariant(await repository.updateClaimDecision(tx, after, row.version), 'a locked claim changes from the version it was read at');
    const before = merchantClaimView(row);
    const changed = merchantClaimView(after);
    await this.deps.events.emitEvent(tx, {
      white_label_id: after.white_label_id,
      merchant_id: after.merchant_id,
      livemode: after.livemode,
      type: 'claim.updated',
      object: { ...changed },
      previous_attributes: computePreviousAttributes({ ...before }, { ...changed }),
      cause: causeOf(staff),
    });
    await this.deps.tenancy.audit(tx, staff.actor, white_label_id, AUDIT_ACTION_OF[decision.action], 'claim', row.claim_id, {
      deposit_id: row.deposit_id,
      from_status: row.status,
      to_status: after.status,
      ...(after.resolution_code === null ? {} : { resolution_code: after.resolution_code }),
      ...(refund_id === null ? {} : { refund_id, refund: decision.action === 'resolve' && decision.refund?.action === 'link' ? 'linked' : 'created' }),
    });
    return ok({ claim: backofficeClaimView(after), replayed: false });
  }

  /**
   * The refund that resolves a claim `refunded_in_service`. A new one is a refund of the claim's deposit to the
   * account the bank verified as its sender, from the merchant's wallet, with every rule and refusal of a merchant's
   * own refund (docs/decisions/refunds.md). A linked one must be a refund of the claim's deposit that still pays or
   * has paid something, and no other claim's.
   *
   * Locks: the claim row is taken first, as every decision takes it, and then the refund's (the deposit order, its
   * allowance, the feed, the wallet). Nothing waits for a claim row while it holds any of those: the only statement
   * that locks a claim row is a decision's first one.
   */
  private async refundOf(tx: Queryable, row: ClaimRow, refund: ClaimRefund, staff: ClaimStaff): Promise<Result<WithdrawalView>> {
    const account = { white_label_id: row.white_label_id, merchant_id: row.merchant_id, livemode: row.livemode };
    if (refund.action === 'create') {
      return this.deps.refunds.create(tx, account, row.deposit_id, { amount_minor: refund.amount_minor, reason_code: refund.reason_code, note: refund.note ?? undefined }, causeOf(staff));
    }
    const unusable = (reason: string) => fail<WithdrawalView>('claim_refund_unusable', { details: { refund_id: refund.refund_id, deposit_id: row.deposit_id, reason } });
    const refunds = (await this.deps.refunds.list(tx, account, row.deposit_id)) ?? [];
    const found = refunds.find((candidate) => candidate.id === refund.refund_id);
    // An unknown id, another brand's or merchant's order, and a refund of another deposit read alike.
    if (!found) return unusable('not_a_refund_of_the_deposit');
    // A settled refund has paid; a closed one with nothing filled paid nothing and pays nothing more.
    if (FINAL_WITHDRAWAL_STATUSES.has(found.status) && found.filled_minor === 0) return unusable('closed_without_payment');
    const holder = await repository.findClaimByRefund(tx, row.white_label_id, found.id);
    if (holder) return unusable('resolves_another_claim');
    return ok(found);
  }
}

/** The claim after a decision: the next version, with who decided, when and (for an ending) why. */
function decidedRow(row: ClaimRow, staff: ClaimStaff, decision: ClaimDecision, now: Date, refund_id: string | null): ClaimRow {
  const next = { ...row, version: row.version + 1, updated_at: now };
  switch (decision.action) {
    case 'investigate':
      return { ...next, status: 'investigating', investigated_by: staff.credential_id, investigated_at: now };
    case 'resolve':
      return { ...next, status: 'resolved', resolution_code: decision.resolution_code, resolution_note: decision.note, resolved_by: staff.credential_id, resolved_at: now, refund_id };
    case 'reject':
      return { ...next, status: 'rejected', resolution_note: decision.note, resolved_by: staff.credential_id, resolved_at: now };
    default: {
      const unknown: never = decision;
      throw new Error(`unknown claim decision ${JSON.stringify(unknown)}`);
    }
  }
}

/** True when this staff member already took exactly this decision on the claim (a retried request). */
function sameDecisionRepeated(row: ClaimRow, staff: ClaimStaff, decision: ClaimDecision): boolean {
  switch (decision.action) {
    case 'investigate':
      return row.status === 'investigating' && row.investigated_by === staff.credential_id;
    case 'resolve':
      // A retried refund resolution gets the refund it made; naming another refund to link is a second decision.
      return (
        row.status === 'resolved' &&
        row.resolved_by === staff.credential_id &&
        row.resolution_code === decision.resolution_code &&
        (decision.refund?.action !== 'link' || decision.refund.refund_id === row.refund_id)
      );
    case 'reject':
      return row.status === 'rejected' && row.resolved_by === staff.credential_id;
    default:
      return false;
  }
}
