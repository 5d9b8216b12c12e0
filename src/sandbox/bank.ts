import crypto from 'node:crypto';
import type { Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import { fail, ok, type Result } from '../platform/errors.ts';
import { formatTimestamp, HOUR_MS } from '../platform/time.ts';
import type { DepositService } from '../deposits/service.ts';
import { notPayableOptions } from '../deposits/transitions.ts';
import type { BankVerifier, TransferLookup, TransferQuery } from '../verification/bank-port.ts';
import { invariant } from '../platform/assert.ts';
import { findBank } from '../banks/service.ts';
import { printedAccount, printedName } from './printed-masks.ts';
import { renderSlipImage } from './slip-image.ts';
import * as repository from './repository.ts';

/**
 * The sandbox bank's transfers (DESIGN.md, "Verification"): a sandbox payer "transfers" to a leg of a
 * deposit (POST /v1/test/bank/transfers, or `npm run cli -- sandbox pay`), the sandbox bank records the
 * transfer and hands back the slip a Thai bank app would show, with a real mini-QR naming the transfer.
 * The sandbox verification adapter then answers from these records exactly as a live provider answers
 * from the banks, masked the way banks print, so a sandbox slip is verified from its pixels through the
 * same pipeline as a live one. Every detail can be set (amount, sender, receiver, time, image format),
 * which makes each verification outcome reproducible.
 */

export interface SandboxTransferInput {
  deposit_id: string;
  /** The leg paid; by default the first unpaid leg. */
  leg_ref?: string | undefined;
  /** What is transferred; by default the leg's amount. */
  amount_minor?: number | undefined;
  /** Who pays; by default the order's declared sender. */
  sender?: { bank_code: string; account_number: string; account_name_th: string; account_name_en?: string | undefined } | undefined;
  /** Who receives; by default the leg's receiver (another account makes the wrong-receiver case). */
  receiver?: { bank_code: string; account_number: string; account_name_th: string } | undefined;
  /** When the bank executes it; by default now. */
  occurred_at?: Date | undefined;
  image_format?: 'png' | 'jpeg' | undefined;
  /** 106.00 THB: the bank will answer that slip checking is off for this transfer (scenarios only). */
  bank_checking_off?: boolean | undefined;
  /** 110.00 THB: kept for a later step of the scenario, which uploads its slip (scenarios only). */
  scenario?: boolean | undefined;
}

export interface SandboxTransferView {
  object: 'sandbox_bank_transfer';
  trans_ref: string;
  sending_bank_code: string;
  amount_minor: number;
  occurred_at: string;
  deposit_id: string;
  leg_ref: string | null;
  livemode: false;
  /** The slip the payer got: the image, and the mini-QR text it carries. */
  slip: { media_type: 'image/png' | 'image/jpeg'; image_base64: string; payload: string };
}

/**
 * The sandbox's external gateway account (104.00 THB, the fallback route of two legs): a business account of the
 * sandbox bank's directory (src/bank-directory/sandbox-adapter.ts), so a transfer to it is a transfer of this bank
 * and its slip verifies against this bank's records like any other. It is the scenario's alone: a brand's own
 * gateway account in test mode is still what its back office sets (none by default), for every other order.
 */
export const SANDBOX_GATEWAY_ACCOUNT = { bank_code: '014', account_number: '3692581470', account_name_th: 'บริษัท สยามซอฟต์ จำกัด' } as const;

const REFERENCE_ALPHABET = '0123456789ABCDEFGHJKLMNPQRSTUVWXYZ';
const BANGKOK_OFFSET_MS = 7 * HOUR_MS;

/**
 * A reference as Thai banks write theirs: the transfer's date in Bangkok (YYYYMMDD), the sending bank's
 * code, and ten random characters (unique in practice; the table's key makes a clash an error, not a mix-up).
 */
function transactionReference(bank_code: string, occurred_at: Date): string {
  const date = new Date(occurred_at.getTime() + BANGKOK_OFFSET_MS).toISOString().slice(0, 10).replaceAll('-', '');
  const random = crypto.randomBytes(10);
  const tail = [...random].map((byte) => REFERENCE_ALPHABET[byte % REFERENCE_ALPHABET.length]).join('');
  return `${date}${bank_code}${tail}`;
}

export class SandboxBank implements BankVerifier {
  constructor(
    private readonly deps: {
      clock: Clock;
      deposits: DepositService;
      /** Where the verification adapter reads transfers (the database; a transaction in writes). */
      database: Queryable;
    },
  ) {}

  /**
   * Makes a transfer for one of the caller's test-mode deposits and renders its slip. Null when the
   * deposit is not the caller's (404); `deposit_not_payable` when it has no leg to pay (still waiting for
   * liquidity). Any status with a leg is allowed: a bank does not know orders, and a transfer after
   * expiry or after settlement is exactly what the late-slip and overpayment cases need.
   */
  async transfer(
    tx: Queryable,
    account: { white_label_id: string; merchant_id: string; livemode: boolean },
    input: SandboxTransferInput,
  ): Promise<Result<SandboxTransferView> | null> {
    invariant(!account.livemode, 'the sandbox bank serves test mode only');
    const parties = await this.deps.deposits.paymentParties(tx, account.white_label_id, input.deposit_id);
    if (!parties || parties.order.merchant_id !== account.merchant_id || parties.order.livemode) return null;
    const leg =
      input.leg_ref !== undefined
        ? parties.legs.find((candidate) => candidate.leg_ref === input.leg_ref)
        : (parties.legs.find((candidate) => candidate.status !== 'filled' && candidate.paid_minor === 0) ?? parties.legs[0]);
    if (input.leg_ref !== undefined && !leg) return fail('validation_error', { details: { fields: [{ path: 'leg_ref', reason: 'unknown_leg' }] } });
    const receiver = input.receiver ?? (leg?.receiver ? { bank_code: leg.receiver.bank_code, account_number: leg.receiver.account_number, account_name_th: leg.receiver.account_name_th } : null);
    if (!receiver) return fail('deposit_not_payable', notPayableOptions(parties.order.status));
    const unknownBanks = [
      ...(input.sender && !(await findBank(tx, input.sender.bank_code)) ? [{ path: 'sender.bank_code', reason: 'unknown_bank' }] : []),
      ...(input.receiver && !(await findBank(tx, input.receiver.bank_code)) ? [{ path: 'receiver.bank_code', reason: 'unknown_bank' }] : []),
    ];
    if (unknownBanks.length > 0) return fail('validation_error', { details: { fields: unknownBanks } });
    const sender = input.sender ?? {
      bank_code: parties.sender.bank_code,
      account_number: parties.sender.account_number,
      account_name_th: parties.sender.name_th,
      account_name_en: parties.sender.name_en ?? undefined,
    };
    const now = this.deps.clock.now();
    const occurred_at = input.occurred_at ?? now;
    const amount_minor = input.amount_minor ?? leg?.amount_minor ?? parties.order.amount_minor;
    const row: repository.SandboxTransferRow = {
      white_label_id: account.white_label_id,
      sending_bank_code: sender.bank_code,
      trans_ref: transactionReference(sender.bank_code, occurred_at),
      amount_minor,
      occurred_at,
      sender_account_number: sender.account_number,
      sender_name_th: sender.account_name_th,
      sender_name_en: sender.account_name_en ?? null,
      receiver_bank_code: receiver.bank_code,
      receiver_account_number: receiver.account_number,
      receiver_name_th: receiver.account_name_th,
      merchant_id: account.merchant_id,
      deposit_id: parties.order.deposit_id,
      leg_ref: leg?.leg_ref ?? null,
      created_at: now,
      bank_checking_off: input.bank_checking_off === true,
      kept_for_scenario: input.scenario === true,
    };
    await repository.insertTransfer(tx, row);
    return ok(await this.transferView(row, input.image_format ?? 'png'));
  }

  /** The transfer a scenario's payer made earlier for this deposit, with its slip drawn again; null when none. */
  async transferOfScenario(db: Queryable, white_label_id: string, deposit_id: string): Promise<SandboxTransferView | null> {
    const row = await repository.findKeptTransfer(db, white_label_id, deposit_id);
    return row ? this.transferView(row, 'png') : null;
  }

  private async transferView(row: repository.SandboxTransferRow, format: 'png' | 'jpeg'): Promise<SandboxTransferView> {
    invariant(row.deposit_id !== null, 'a transfer of the sandbox API names its deposit');
    const slip = await renderSlipImage(
      {
        sending_bank_code: row.sending_bank_code,
        trans_ref: row.trans_ref,
        amount_minor: row.amount_minor,
        occurred_at: row.occurred_at,
        sender: { bank_code: row.sending_bank_code, account_number: row.sender_account_number, name_th: row.sender_name_th, name_en: row.sender_name_en },
        receiver: { bank_code: row.receiver_bank_code, account_number: row.receiver_account_number, name_th: row.receiver_name_th },
      },
      { format },
    );
    return {
      object: 'sandbox_bank_transfer',
      trans_ref: row.trans_ref,
      sending_bank_code: row.sending_bank_code,
      amount_minor: row.amount_minor,
      occurred_at: formatTimestamp(row.occurred_at),
      deposit_id: row.deposit_id,
      leg_ref: row.leg_ref,
      livemode: false,
      slip: { media_type: slip.media_type, image_base64: slip.bytes.toString('base64'), payload: slip.payload },
    };
  }

  /**
   * The sandbox verification adapter: the bank's own record of a transfer, with account numbers and
   * names as banks print them (masked), never more than a live provider would give.
   */
  async verifyTransfer(query: TransferQuery): Promise<TransferLookup> {
    invariant(!query.livemode, 'the sandbox bank verifies test-mode slips only');
    const row = await repository.findTransfer(this.deps.database, query);
    if (!row) return { outcome: 'not_found' };
    if (row.bank_checking_off) return { outcome: 'bank_disabled' };
    const masked = (account_number: string) => printedAccount(account_number).replaceAll('-', '');
    return {
      outcome: 'found',
      transfer: {
        sending_bank_code: row.sending_bank_code,
        trans_ref: row.trans_ref,
        amount_minor: row.amount_minor,
        occurred_at: row.occurred_at,
        sender: {
          bank_code: row.sending_bank_code,
          account_number: masked(row.sender_account_number),
          name_th: printedName(row.sender_name_th),
          name_en: row.sender_name_en === null ? null : printedName(row.sender_name_en),
        },
        receiver: { bank_code: row.receiver_bank_code, account_number: masked(row.receiver_account_number), name_th: printedName(row.receiver_name_th), name_en: null },
      },
    };
  }
}
