import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import type { ReadPart } from '../platform/read-part.ts';
import { invariant } from '../platform/assert.ts';
import { hmacSha256Hex, type SecretBox } from '../platform/crypto.ts';
import { ApiError, fail, ok, type Result } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { formatNullableTimestamp, formatTimestamp } from '../platform/time.ts';
import { type EventsService } from '../events/service.ts';
import { SYSTEM_CAUSE, type EventCause } from '../platform/cause.ts';
import { applyTransition, TransitionTable } from '../events/transition.ts';
import { scheduleJob, type JobHandler, type JobSpec } from '../jobs/index.ts';
import { namesMatch, normaliseName, type AccountLookupResult, type BankDirectory } from '../bank-directory/port.ts';
import { SandboxBankDirectory } from '../bank-directory/sandbox-adapter.ts';
import * as repository from './repository.ts';
import { findBank, type BankRow } from '../banks/service.ts';
import type { BeneficiaryAccount, BeneficiaryRow, BeneficiaryStatus, VerificationFailureCode } from './repository.ts';

/** A beneficiary's row as a planned withdrawal creation prefetches it (`forWithdrawalPart`). */
export type { BeneficiaryRow } from './repository.ts';

/**
 * Beneficiaries: the bank accounts a merchant pays out to. A beneficiary is created
 * `pending_verification`, and a job (`beneficiaries.verify`) asks the bank directory who holds the
 * account, outside any transaction, then moves it to `verified` or `rejected` through the transition
 * table. The full account number is kept sealed; it leaves this module only through
 * `payee`, for the payout itself, and is never returned, logged or put in an event.
 */

/** A payout's receiving account, in full. */
export interface Payee {
  bank_code: string;
  account_number: string;
  account_name_th: string;
}

export type { BeneficiaryAccount, BeneficiaryStatus, VerificationFailureCode } from './repository.ts';

export const VERIFY_BENEFICIARY_TASK = 'beneficiaries.verify';
export const ACCOUNT_NUMBER_PURPOSE = 'beneficiary.account_number';
export const PROMPTPAY_ID_PURPOSE = 'beneficiary.promptpay_id';
/** The fixed string from which the dedupe HMAC key is derived (see `deriveAccountLookupKey`). */
export const ACCOUNT_LOOKUP_KEY_PURPOSE = 'beneficiary.account_lookup.v1';
/** Retries of a verification the bank could not answer: the backoff reaches its one-hour ceiling
 * after 12 attempts, so 20 attempts keep trying for about nine hours. */
export const VERIFY_MAX_ATTEMPTS = 20;

export const ACCOUNT_NUMBER_PATTERN = /^[0-9]{6,20}$/;
export const PROMPTPAY_ID_PATTERN = /^(?:[0-9]{10}|[0-9]{13})$/;
export const BANK_CODE_PATTERN = /^[0-9]{3}$/;

/**
 * The dedupe key: HMAC-SHA256 keyed by the master key over a fixed purpose string. Deterministic (the
 * same master key gives the same key in every process), and useless without the master key, so the
 * stored HMAC cannot be brute-forced over the small space of account numbers.
 */
export function deriveAccountLookupKey(master_key: Buffer): Buffer {
  invariant(master_key.length === 32, 'the master key is 32 bytes');
  return Buffer.from(hmacSha256Hex(master_key, ACCOUNT_LOOKUP_KEY_PURPOSE), 'hex');
}

export const BENEFICIARY_TRANSITIONS = new TransitionTable<BeneficiaryStatus>(
  'beneficiary',
  ['pending_verification', 'verified', 'rejected'],
  [
    { from: null, to: 'pending_verification', trigger: 'create' },
    // A refund's payer: the bank proved the account by a transfer from it (src/refunds/).
    { from: null, to: 'verified', trigger: 'create_proven' },
    { from: 'pending_verification', to: 'verified', trigger: 'verification_passed' },
    { from: 'pending_verification', to: 'rejected', trigger: 'verification_failed' },
  ],
);

export interface BeneficiaryVerification {
  checked_at: string;
  name_match: boolean;
  failure_code?: VerificationFailureCode;
}

// A type alias (not an interface) so that it satisfies VersionedView's index signature.
export type BeneficiaryView = {
  id: string;
  object: 'beneficiary';
  version: number;
  status: BeneficiaryStatus;
  bank_code: string;
  bank_name_th: string;
  account_number_masked: string;
  account_name_th: string;
  account_name_en?: string;
  promptpay_id_masked?: string;
  end_user_ref?: string;
  verification: BeneficiaryVerification | null;
  livemode: boolean;
  created_at: string;
  verified_at: string | null;
};

/** The one masked form, for account numbers and PromptPay ids alike: six asterisks and the last four
 * digits, whatever the length, so the mask does not reveal how long the number is. */
export function maskLast4(last4: string): string {
  return `******${last4}`;
}

export function beneficiaryView(row: BeneficiaryRow): BeneficiaryView {
  // Built in wire order; optional keys are absent (not null) when the beneficiary has no value.
  return {
    id: row.beneficiary_id,
    object: 'beneficiary',
    version: row.version,
    status: row.status,
    bank_code: row.bank_code,
    bank_name_th: row.bank_name_th,
    account_number_masked: maskLast4(row.account_number_last4),
    account_name_th: row.account_name_th,
    ...(row.account_name_en !== null ? { account_name_en: row.account_name_en } : {}),
    ...(row.promptpay_id_last4 !== null ? { promptpay_id_masked: maskLast4(row.promptpay_id_last4) } : {}),
    ...(row.end_user_ref !== null ? { end_user_ref: row.end_user_ref } : {}),
    verification:
      row.verification_checked_at === null
        ? null
        : {
            checked_at: formatTimestamp(row.verification_checked_at),
            name_match: row.verification_name_match === true,
            ...(row.verification_failure_code !== null ? { failure_code: row.verification_failure_code } : {}),
          },
    livemode: row.livemode,
    created_at: formatTimestamp(row.created_at),
    verified_at: formatNullableTimestamp(row.verified_at),
  };
}

/**
 * True when the name begins with an honorific that `normaliseName` would strip (นาย, นางสาว, Mr., …),
 * or is only one. It reuses the port's own normalisation so the two can never disagree: the name is
 * normalised once as is and once behind a neutral leading mark (which hides any honorific from the
 * stripping); the two differ exactly when an honorific was stripped.
 */
export function startsWithHonorific(name: string): boolean {
  const MARK = '#';
  return normaliseName(name) !== normaliseName(`${MARK} ${name}`).slice(MARK.length + 1);
}

export interface NewBeneficiaryInput {
  bank_code: string;
  account_number: string;
  account_name_th: string;
  account_name_en?: string | undefined;
  promptpay_id?: string | undefined;
  end_user_ref?: string | undefined;
}

/** The inline beneficiary of a withdrawal (spec, POST /v1/pay/withdrawals). */
export interface InlineBeneficiary {
  bank_code: string;
  account_number: string;
  account_name_th: string;
  promptpay_id?: string | undefined;
}

export interface BeneficiaryDependencies {
  events: EventsService;
  clock: Clock;
  secretBox: SecretBox;
  /** From `deriveAccountLookupKey(master_key)`; keys the dedupe HMAC. */
  account_lookup_key: Buffer;
}

export function verifyJobSpec(row: Pick<BeneficiaryRow, 'white_label_id' | 'merchant_id' | 'livemode' | 'beneficiary_id' | 'version'>): JobSpec {
  return {
    task: VERIFY_BENEFICIARY_TASK,
    // Ids only: the job payload never carries the account number.
    payload: {
      white_label_id: row.white_label_id,
      merchant_id: row.merchant_id,
      livemode: row.livemode,
      beneficiary_id: row.beneficiary_id,
      version: row.version,
    },
    job_key: `${VERIFY_BENEFICIARY_TASK}:${row.beneficiary_id}`,
    max_attempts: VERIFY_MAX_ATTEMPTS,
    white_label_id: row.white_label_id,
  };
}

function fieldError(path: string, reason: string, hint?: string): ApiError {
  return new ApiError('validation_error', { details: { fields: [hint ? { path, reason, hint } : { path, reason }] } });
}

export class BeneficiaryService {
  constructor(private readonly deps: BeneficiaryDependencies) {
    invariant(deps.account_lookup_key.length >= 32, 'the account lookup key has at least 32 bytes');
  }

  private accountHmac(bank_code: string, account_number: string): string {
    return hmacSha256Hex(this.deps.account_lookup_key, `${bank_code}:${account_number}`);
  }

  /**
   * The bank must be in the bank list and receive transfers (`receiver` side). A bank that is only
   * switched off for now is accepted: its verification waits (bank_unavailable is retried).
   * `path_prefix` names the field in the caller's body (`beneficiary.` inside a withdrawal).
   */
  async checkReceivingBank(db: Queryable, bank_code: string, path_prefix = ''): Promise<BankRow> {
    const bank = BANK_CODE_PATTERN.test(bank_code) ? await findBank(db, bank_code) : null;
    if (!bank) throw fieldError(`${path_prefix}bank_code`, 'unknown_bank', 'a three-digit code from GET /v1/pay/banks');
    if (!bank.sides.includes('receiver')) throw fieldError(`${path_prefix}bank_code`, 'bank_not_receiving', 'this bank cannot receive payouts');
    return bank;
  }

  /**
   * Creates a beneficiary and enqueues its verification, in the caller's transaction; or returns the
   * existing beneficiary of the same account (same merchant and environment) unchanged, with
   * `created: false`. An existing one still pending gets its verification enqueued again (a no-op
   * while one is queued), which restarts a verification whose retries ran out.
   */
  async create(
    tx: Queryable,
    account: BeneficiaryAccount,
    input: NewBeneficiaryInput,
    cause: EventCause,
    path_prefix = '',
  ): Promise<{ beneficiary: BeneficiaryView; created: boolean }> {
    invariant(ACCOUNT_NUMBER_PATTERN.test(input.account_number), 'the account number was validated as 6-20 digits');
    invariant(input.promptpay_id === undefined || PROMPTPAY_ID_PATTERN.test(input.promptpay_id), 'the PromptPay id was validated');
    const bank = await this.checkReceivingBank(tx, input.bank_code, path_prefix);
    if (startsWithHonorific(input.account_name_th)) {
      throw fieldError(`${path_prefix}account_name_th`, 'must_not_contain_title', 'the holder name without นาย, นาง, นางสาว, Mr., …');
    }
    const account_number_hmac = this.accountHmac(input.bank_code, input.account_number);

    const existing = await repository.findByAccountHmac(tx, account, account_number_hmac);
    if (existing) return { beneficiary: await this.resumePending(tx, existing), created: false };

    const row = this.newRow(account, bank, input, account_number_hmac, null);
    const result = await applyTransition(tx, this.deps, {
      table: BENEFICIARY_TRANSITIONS,
      trigger: 'create',
      before: null,
      after: beneficiaryView(row),
      persist: (db) => repository.insertBeneficiary(db, row),
      event: { type: 'beneficiary.created', ...account, cause },
      jobs: [verifyJobSpec(row)],
    });
    if (result.ok) return { beneficiary: result.view, created: true };
    // A concurrent request created the same account first (the insert found the unique key taken).
    const winner = await repository.findByAccountHmac(tx, account, account_number_hmac);
    invariant(winner !== null, 'a beneficiary insert that lost its unique key has a winner');
    return { beneficiary: await this.resumePending(tx, winner), created: false };
  }

  /** A new beneficiary's row: pending verification, or verified at once by `proven_at` (a refund's payer). */
  private newRow(account: BeneficiaryAccount, bank: BankRow, input: NewBeneficiaryInput, account_number_hmac: string, proven_at: Date | null): BeneficiaryRow {
    const now = this.deps.clock.now();
    return {
      ...account,
      beneficiary_id: newId('beneficiary'),
      version: 1,
      status: proven_at ? 'verified' : 'pending_verification',
      bank_code: bank.bank_code,
      bank_name_th: bank.name_th,
      account_number_sealed: this.deps.secretBox.seal(input.account_number, ACCOUNT_NUMBER_PURPOSE),
      account_number_hmac,
      account_number_last4: input.account_number.slice(-4),
      account_name_th: input.account_name_th,
      account_name_en: input.account_name_en ?? null,
      promptpay_id_sealed: input.promptpay_id === undefined ? null : this.deps.secretBox.seal(input.promptpay_id, PROMPTPAY_ID_PURPOSE),
      promptpay_id_last4: input.promptpay_id === undefined ? null : input.promptpay_id.slice(-4),
      end_user_ref: input.end_user_ref ?? null,
      verification_checked_at: proven_at,
      verification_name_match: proven_at ? true : null,
      verification_failure_code: null,
      created_at: now,
      updated_at: now,
      verified_at: proven_at,
    };
  }

  /**
   * The beneficiary a refund pays: the account the bank proved by paying a deposit from it (the refunds layer checked
   * that the verified transfers came from it), so it is verified at creation (`beneficiary.created` with status
   * `verified`), with the payer's declared name as the holder's. The same account already a beneficiary of the merchant
   * is used as it is when verified; one pending or rejected is answered as such (409 `beneficiary_not_verified`).
   */
  async ensureProvenPayer(tx: Queryable, account: BeneficiaryAccount, input: NewBeneficiaryInput, cause: EventCause): Promise<Result<BeneficiaryView>> {
    invariant(ACCOUNT_NUMBER_PATTERN.test(input.account_number), 'a deposit sender account is 6-20 digits');
    const account_number_hmac = this.accountHmac(input.bank_code, input.account_number);
    const existing = await repository.findByAccountHmac(tx, account, account_number_hmac);
    if (existing) {
      if (existing.status === 'verified') return ok(beneficiaryView(existing));
      return fail('beneficiary_not_verified', { details: { beneficiary_id: existing.beneficiary_id, status: existing.status } });
    }
    const bank = await findBank(tx, input.bank_code);
    invariant(bank !== null, 'a deposit sender bank is in the bank list');
    // Some banks only send (spec, bank record `side`): a payer who paid from one cannot be paid back there.
    if (!bank.sides.includes('receiver')) return fail('refund_payee_unverified', { details: { reason: 'bank_not_receiving', bank_code: bank.bank_code } });
    const row = this.newRow(account, bank, input, account_number_hmac, this.deps.clock.now());
    const result = await applyTransition(tx, this.deps, {
      table: BENEFICIARY_TRANSITIONS,
      trigger: 'create_proven',
      before: null,
      after: beneficiaryView(row),
      persist: (db) => repository.insertBeneficiary(db, row),
      event: { type: 'beneficiary.created', ...account, cause },
    });
    if (result.ok) return ok(result.view);
    // A concurrent request created the same account first: it is answered as any existing beneficiary is.
    const winner = await repository.findByAccountHmac(tx, account, account_number_hmac);
    invariant(winner !== null, 'a beneficiary insert that lost its unique key has a winner');
    if (winner.status === 'verified') return ok(beneficiaryView(winner));
    return fail('beneficiary_not_verified', { details: { beneficiary_id: winner.beneficiary_id, status: winner.status } });
  }

  private async resumePending(tx: Queryable, row: BeneficiaryRow): Promise<BeneficiaryView> {
    if (row.status === 'pending_verification') {
      await scheduleJob(tx, this.deps.clock, verifyJobSpec(row));
    }
    return beneficiaryView(row);
  }

  async get(db: Queryable, account: BeneficiaryAccount, beneficiary_id: string): Promise<BeneficiaryView | null> {
    const row = await repository.findById(db, account, beneficiary_id);
    return row ? beneficiaryView(row) : null;
  }

  /** For POST /v1/pay/withdrawals with `beneficiary_id`: the caller's beneficiary, or null (another
   * merchant's or environment's id is null too). The caller answers 409 unless `status` is verified. */
  async findForWithdrawal(
    tx: Queryable,
    account: BeneficiaryAccount,
    beneficiary_id: string,
    /** What the request's first statement answered for `forWithdrawalPart`, when it carried it. */
    prefetched?: { row: BeneficiaryRow | null },
  ): Promise<BeneficiaryView | null> {
    if (!prefetched) return this.get(tx, account, beneficiary_id);
    return prefetched.row ? beneficiaryView(prefetched.row) : null;
  }

  /** `findForWithdrawal`'s read, for a planned withdrawal creation's first statement to carry (src/platform/read-part.ts). */
  forWithdrawalPart(account: BeneficiaryAccount, beneficiary_id: string): ReadPart<BeneficiaryRow | null> {
    return repository.findByIdPart(account, beneficiary_id);
  }

  /**
   * For POST /v1/pay/withdrawals with an inline `beneficiary`: finds the beneficiary of that account,
   * or creates it (event `beneficiary.created`, verification enqueued) in the caller's transaction.
   * `verified` is true only for an already verified beneficiary: a new one is never verified yet, so
   * the withdrawal answers 409 `beneficiary_not_verified` and the merchant retries after the
   * `beneficiary.verified` event. Validation errors name fields under `beneficiary.`.
   */
  async ensureForWithdrawal(
    tx: Queryable,
    account: BeneficiaryAccount,
    inline: InlineBeneficiary,
    cause: EventCause,
  ): Promise<{ beneficiary: BeneficiaryView; verified: boolean; created: boolean }> {
    const input: NewBeneficiaryInput = {
      bank_code: inline.bank_code,
      account_number: inline.account_number,
      account_name_th: inline.account_name_th,
      promptpay_id: inline.promptpay_id,
    };
    const { beneficiary, created } = await this.create(tx, account, input, cause, 'beneficiary.');
    return { beneficiary, verified: beneficiary.status === 'verified', created };
  }

  /**
   * Creates a test-mode beneficiary and verifies it at once against the sandbox bank, in the caller's
   * transaction (the sandbox bank is our own table, so no network call is held in it). For the
   * sandbox's own counterparty accounts; merchants' beneficiaries are verified by the job.
   */
  async createVerifiedInSandbox(tx: Queryable, account: BeneficiaryAccount, input: NewBeneficiaryInput): Promise<BeneficiaryView> {
    invariant(!account.livemode, 'only test mode verifies against the sandbox bank in-line');
    const { beneficiary } = await this.create(tx, account, input, SYSTEM_CAUSE);
    if (beneficiary.status !== 'pending_verification') return beneficiary;
    const result = await new SandboxBankDirectory(tx, this.deps.clock).lookupAccount({ ...input, white_label_id: account.white_label_id, merchant_id: account.merchant_id, livemode: false });
    invariant(result.outcome !== 'bank_unavailable', 'a sandbox counterparty account is at an available bank');
    const decision = decideVerification({ account_name_th: input.account_name_th, account_name_en: input.account_name_en ?? null }, result);
    await applyVerificationDecision(tx, this.deps.clock, this.deps.events, account, { beneficiary_id: beneficiary.id, version: beneficiary.version }, decision);
    const verified = await this.get(tx, account, beneficiary.id);
    invariant(verified, 'the beneficiary exists');
    return verified;
  }

  /**
   * Who a payout goes to, with the full account number, for the payout itself (and a PromptPay QR);
   * never for display or logs. One read: matching asks this for every leg it reserves.
   */
  async payee(db: Queryable, account: BeneficiaryAccount, beneficiary_id: string): Promise<Payee | null> {
    const row = await repository.findById(db, account, beneficiary_id);
    return row ? this.payeeOf(row) : null;
  }

  /** `payee` as a read another module's statement carries (src/platform/read-part.ts). */
  payeePart(account: BeneficiaryAccount, beneficiary_id: string): ReadPart<Payee | null> {
    const part = repository.payeeRowPart(account, beneficiary_id);
    return {
      ...part,
      parse: (value) => {
        const row = part.parse(value);
        return row ? this.payeeOf(row) : null;
      },
    };
  }

  private payeeOf(row: repository.PayeeRow): Payee {
    return {
      bank_code: row.bank_code,
      account_number: this.deps.secretBox.open(row.account_number_sealed, ACCOUNT_NUMBER_PURPOSE),
      account_name_th: row.account_name_th,
    };
  }
}

// ---------------------------------------------------------------------------------------------------
// Verification (the job)

export type VerificationOutcome = 'verified' | 'rejected' | 'bank_unavailable' | 'stale';

interface Decision {
  status: 'verified' | 'rejected';
  name_match: boolean;
  failure_code: VerificationFailureCode | null;
}

/** What a directory answer means for a beneficiary. `bank_unavailable` is not decided here: it waits. */
export function decideVerification(
  declared: { account_name_th: string; account_name_en: string | null },
  result: Exclude<AccountLookupResult, { outcome: 'bank_unavailable' }>,
): Decision {
  if (result.outcome === 'not_found') return { status: 'rejected', name_match: false, failure_code: 'account_not_found' };
  // Thai against Thai; English against English when both sides have one.
  const name_match =
    namesMatch(declared.account_name_th, { holder_name_th: result.holder_name_th, holder_name_en: null }) ||
    (declared.account_name_en !== null &&
      result.holder_name_en !== null &&
      namesMatch(declared.account_name_en, { holder_name_th: result.holder_name_en, holder_name_en: null }));
  switch (result.account_status) {
    case 'closed':
      return { status: 'rejected', name_match, failure_code: 'account_closed' };
    case 'frozen':
      return { status: 'rejected', name_match, failure_code: 'account_frozen' };
    case 'open':
      return name_match ? { status: 'verified', name_match, failure_code: null } : { status: 'rejected', name_match, failure_code: 'name_mismatch' };
    default:
      // A status a future adapter may add: not usable for payouts until we know what it means.
      return { status: 'rejected', name_match, failure_code: 'account_closed' };
  }
}

export interface VerifyDependencies {
  events: EventsService;
  secretBox: SecretBox;
  /** The live directory, when one exists. Without it live verifications wait as `bank_unavailable`. */
  live_directory?: BankDirectory | null;
  /** Overrides the test-mode directory (the sandbox bank over `database` by default). */
  sandbox_directory?: (database: Database, clock: Clock) => BankDirectory;
}

export interface VerifyPayload extends BeneficiaryAccount {
  beneficiary_id: string;
  version: number;
}

/**
 * Verifies one beneficiary. The directory is asked outside any transaction (a lookup may be a slow
 * HTTP call); the outcome is then applied in a short transaction, only if the beneficiary is still
 * pending at the version the job was made for, so a stale or repeated job does nothing.
 */
export async function verifyBeneficiary(database: Database, clock: Clock, deps: VerifyDependencies, payload: VerifyPayload): Promise<VerificationOutcome> {
  const account: BeneficiaryAccount = { white_label_id: payload.white_label_id, merchant_id: payload.merchant_id, livemode: payload.livemode };
  const row = await repository.findById(database, account, payload.beneficiary_id);
  if (!row || row.status !== 'pending_verification' || row.version !== payload.version) return 'stale';

  const directory = account.livemode
    ? (deps.live_directory ?? null)
    : (deps.sandbox_directory ?? ((db: Database, c: Clock) => new SandboxBankDirectory(db, c)))(database, clock);
  const result: AccountLookupResult = directory
    ? await directory.lookupAccount({
        white_label_id: account.white_label_id,
        merchant_id: account.merchant_id,
        livemode: account.livemode,
        bank_code: row.bank_code,
        account_number: deps.secretBox.open(row.account_number_sealed, ACCOUNT_NUMBER_PURPOSE),
      })
    : { outcome: 'bank_unavailable' };
  if (result.outcome === 'bank_unavailable') return 'bank_unavailable';
  const decision = decideVerification(row, result);

  return database.transaction((tx) => applyVerificationDecision(tx, clock, deps.events, account, payload, decision));
}

/**
 * Applies a verification decision in the caller's transaction, only if the beneficiary is still
 * pending at the version the decision was made for (a stale decision does nothing).
 */
async function applyVerificationDecision(
  tx: Queryable,
  clock: Clock,
  events: EventsService,
  account: BeneficiaryAccount,
  payload: { beneficiary_id: string; version: number },
  decision: Decision,
): Promise<VerificationOutcome> {
  const current = await repository.findById(tx, account, payload.beneficiary_id);
  if (!current || current.status !== 'pending_verification' || current.version !== payload.version) return 'stale';
  const now = clock.now();
  const next: BeneficiaryRow = {
    ...current,
    status: decision.status,
    version: current.version + 1,
    verification_checked_at: now,
    verification_name_match: decision.name_match,
    verification_failure_code: decision.failure_code,
    verified_at: decision.status === 'verified' ? now : null,
    updated_at: now,
  };
  const transition = await applyTransition(
    tx,
    { events, clock },
    {
      table: BENEFICIARY_TRANSITIONS,
      trigger: decision.status === 'verified' ? 'verification_passed' : 'verification_failed',
      before: beneficiaryView(current),
      after: beneficiaryView(next),
      persist: (db) =>
        repository.updateVerification(db, account, current.beneficiary_id, current.version, {
          status: next.status,
          version: next.version,
          verification_checked_at: now,
          verification_name_match: decision.name_match,
          verification_failure_code: decision.failure_code,
          verified_at: next.verified_at,
          updated_at: now,
        }),
      event: {
        type: decision.status === 'verified' ? 'beneficiary.verified' : 'beneficiary.verification_failed',
        ...account,
        cause: SYSTEM_CAUSE,
      },
    },
  );
  return transition.ok ? decision.status : 'stale';
}

/** Thrown so that the queue retries with its backoff; the message carries ids and codes only. */
export class VerificationDeferred extends Error {
  override name = 'VerificationDeferred';
}

/**
 * The `beneficiaries.verify` job handler. A `bank_unavailable` answer (the bank is switched off, or
 * live mode has no directory adapter yet) leaves the beneficiary `pending_verification` unchanged and
 * throws, so the queue retries with backoff; after the last attempt the job is `failed` and the
 * beneficiary stays pending until its verification is enqueued again (creating it again does that).
 */
export function createBeneficiaryVerifyHandler(deps: VerifyDependencies): JobHandler {
  return async (job, context) => {
    const payload = job.payload as unknown as VerifyPayload;
    const outcome = await verifyBeneficiary(context.database, context.clock, deps, payload);
    if (outcome === 'bank_unavailable') {
      throw new VerificationDeferred(`beneficiary ${payload.beneficiary_id}: bank_unavailable, verification retried later`);
    }
  };
}
