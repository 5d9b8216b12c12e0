/**
 * The bank-verification port: given the sending bank and the transaction reference that a slip's
 * mini-QR names, the bank (through a slip-verification provider, or the sandbox bank in test mode)
 * answers with the authoritative transfer. Nothing a slip image says is trusted beyond those two
 * values: amount, time, sender and receiver all come from here.
 *
 * Adapters serve it: the sandbox bank (`src/sandbox/verification-adapter.ts`, test mode, answers
 * from the sandbox bank's own records) and, in live mode, the generic HTTP adapter (`http-adapter.ts`,
 * a provider speaking our own contract, configured by URL and key) or one of the provider adapters
 * (`slipok-adapter.ts`, `easyslip-adapter.ts`, `rdcw-adapter.ts`; docs/decisions/slip-providers.md).
 * Wiring picks the adapter by livemode; an adapter never falls back to the other.
 */

/** One side of a transfer as the bank reports it. Account numbers and names may be masked. */
export interface TransferParty {
  /** Bank of Thailand code, three digits. */
  bank_code: string;
  /**
   * The account number as the bank gives it: digits, where some may be replaced by a mask character
   * (`x`, `X`, `*` or `•`) the way Thai banks print them (`xxx-x-x1234-x`). Separators (`-`, spaces)
   * are removed by the adapter, so only digits and mask characters remain.
   */
  account_number: string;
  /** The holder's Thai name as the bank prints it (possibly with an honorific, possibly truncated); null when not given. */
  name_th: string | null;
  /** The holder's English name as the bank prints it; null when not given. */
  name_en: string | null;
}

export interface VerifiedTransfer {
  sending_bank_code: string;
  trans_ref: string;
  /** What the bank moved, in satang. */
  amount_minor: number;
  /** When the bank executed the transfer. */
  occurred_at: Date;
  sender: TransferParty;
  receiver: TransferParty;
}

export interface TransferQuery {
  white_label_id: string;
  livemode: boolean;
  sending_bank_code: string;
  trans_ref: string;
}

/**
 * Why an answer could not be had; every one of these is retried by the caller for a bounded time.
 * - `not_yet_available`: the provider says the transfer is too new, its bank has not published it yet;
 * - `provider_refused`: the provider answered with a documented refusal that says nothing about the
 *   transfer (a request it calls invalid, a QR it will not read, an answer its documentation does not
 *   explain), which a later attempt may not repeat.
 */
export type UnavailableReason =
  | 'not_configured'
  | 'timeout'
  | 'http_error'
  | 'circuit_open'
  | 'malformed_response'
  | 'bank_unavailable'
  | 'not_yet_available'
  | 'provider_refused';

/**
 * Why the provider needs a person before it can answer again: its quota or subscription is used up, or it
 * refuses our credentials (a wrong key, branch or client, an address not allowed, a deactivated account).
 */
export type OperatorAlertReason = 'quota_exhausted' | 'credentials_refused';

export type TransferLookup =
  | { outcome: 'found'; transfer: VerifiedTransfer }
  /** The bank has no such transfer: the slip names a transfer that did not happen (or not at this bank). */
  | { outcome: 'not_found' }
  /** No authoritative answer now. Never a business verdict: the slip waits and is asked about again. */
  | { outcome: 'unavailable'; reason: UnavailableReason }
  /**
   * The bank has turned slip checking off, or the provider cannot answer until a person acts: no answer
   * will come soon, so a person checks the slip (BANK_DISABLED). `operator_alert` says that the cause is
   * the provider account, which an operator must mend (the provider adapters set it; see
   * docs/decisions/slip-providers.md).
   */
  | { outcome: 'bank_disabled'; operator_alert?: OperatorAlertReason };

export interface BankVerifier {
  /** Never throws for an expected outcome: a provider failure is `unavailable`, never an exception. */
  verifyTransfer(query: TransferQuery): Promise<TransferLookup>;
}

/** The characters banks print in place of hidden digits or letters. */
export const MASK_CHARACTERS = ['x', 'X', '*', '•'] as const;
