/**
 * What the three provider adapters (SlipOK, EasySlip, RDCW) have in common beyond the transport: the
 * verifier's skeleton (ask, read the answer, raise the operator alert, test the connection) and the shape
 * of a transfer as the Thai banks' slip-verification API returns it (`transRef`, `sendingBank`,
 * `transDate`, `sender.displayName`, `sender.account.value`, …), which SlipOK and RDCW pass on as it is.
 * The mapping of each provider is recorded in docs/decisions/slip-providers.md.
 */
import { z } from 'zod';
import type { BankVerifier, TransferLookup, TransferParty, TransferQuery, VerifiedTransfer } from './bank-port.ts';
import {
  MALFORMED,
  ProviderTransport,
  accountSchema,
  amountSchema,
  bangkokTimeOf,
  bankCodeSchema,
  nameSchema,
  namesOfDisplay,
  numericAmountSchema,
  timestampSchema,
  type ConnectionCheck,
  type ProviderAlert,
  type ProviderAnswer,
  type ProviderRequest,
  type ResilienceOptions,
} from './provider-http.ts';

/** The options every provider adapter takes besides its credentials. */
export interface ProviderVerifierOptions extends ResilienceOptions {
  /** The provider's base URL (its public one by default); http or https, without credentials. */
  url?: string;
  /**
   * Told when the provider needs a person: its quota is used up, it refuses the credentials, or its
   * circuit breaker opened. Called synchronously; what it throws is ignored, so that an alert can never
   * turn a provider's answer into an exception.
   */
  on_alert?: (alert: ProviderAlert) => void;
}

/**
 * What a test of the connection makes of an error answer: the operator alert its documented code maps to
 * (quota used up, credentials refused), or an answer it did not expect.
 */
export function connectionRefusal(mapped: TransferLookup | null | undefined): ConnectionCheck {
  if (mapped?.outcome === 'bank_disabled' && mapped.operator_alert !== undefined) return { ok: false, reason: mapped.operator_alert };
  return { ok: false, reason: 'unexpected_answer' };
}

/** The transfer when it is the one asked about; an answer about any other transfer is malformed. */
export function foundIfAbout(transfer: VerifiedTransfer, query: TransferQuery): TransferLookup {
  if (transfer.sending_bank_code !== query.sending_bank_code || transfer.trans_ref !== query.trans_ref) return MALFORMED;
  return { outcome: 'found', transfer };
}

/**
 * A live verifier of one provider account. Subclasses say how to ask and how to read the answers; this
 * class runs them through the transport and tells `on_alert` what an operator must mend.
 */
export abstract class ProviderVerifier implements BankVerifier {
  protected readonly transport: ProviderTransport;
  private readonly on_alert: ((alert: ProviderAlert) => void) | undefined;

  constructor(
    private readonly provider: ProviderAlert['provider'],
    options: ProviderVerifierOptions,
  ) {
    this.on_alert = options.on_alert;
    this.transport = new ProviderTransport(options, () => this.alert('circuit_open'));
  }

  async verifyTransfer(query: TransferQuery): Promise<TransferLookup> {
    const lookup = await this.transport.lookup(this.verifyRequest(query), (answer) => this.readVerifyAnswer(answer, query));
    if (lookup.outcome === 'bank_disabled' && lookup.operator_alert !== undefined) this.alert(lookup.operator_alert);
    return lookup;
  }

  /** Asks the provider's info or quota route: the verifications left, or why the provider refuses. */
  async testConnection(): Promise<ConnectionCheck> {
    const probe = await this.transport.probe(this.connectionRequest());
    if (!probe.answered) return { ok: false, reason: 'unreachable' };
    const check = this.readConnectionAnswer(probe.answer);
    if (!check.ok && (check.reason === 'quota_exhausted' || check.reason === 'credentials_refused')) this.alert(check.reason);
    return check;
  }

  protected abstract verifyRequest(query: TransferQuery): ProviderRequest;
  protected abstract readVerifyAnswer(answer: ProviderAnswer, query: TransferQuery): TransferLookup;
  protected abstract connectionRequest(): ProviderRequest;
  protected abstract readConnectionAnswer(answer: ProviderAnswer): ConnectionCheck;

  private alert(reason: ProviderAlert['reason']): void {
    try {
      this.on_alert?.({ provider: this.provider, reason });
    } catch {
      // The alert is the caller's business; its failure must not change the provider's answer.
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// The banks' slip-verification shape (SlipOK and RDCW).

const bankSlipPartySchema = z.object({
  displayName: nameSchema,
  name: nameSchema,
  // A transfer is between bank accounts: a party with only a proxy (a phone number, a national id) is
  // malformed rather than guessed at (docs/decisions/slip-providers.md, open questions).
  account: z.object({ value: accountSchema }),
});

/** A transfer as the banks' slip-verification API reports it. Unknown fields are ignored. */
export const bankSlipSchema = z.object({
  transRef: z.string().min(1).max(200),
  sendingBank: bankCodeSchema,
  receivingBank: bankCodeSchema,
  transDate: z.string().max(8).optional(),
  transTime: z.string().max(8).optional(),
  transTimestamp: timestampSchema.optional(),
  // SlipOK documents a JSON number; RDCW's SDKs disagree between a number and decimal text.
  amount: z.union([numericAmountSchema, amountSchema]),
  sender: bankSlipPartySchema,
  receiver: bankSlipPartySchema,
});

type BankSlip = z.infer<typeof bankSlipSchema>;

function bankSlipPartyOf(bank_code: string, party: BankSlip['sender']): TransferParty {
  return { bank_code, account_number: party.account.value, ...namesOfDisplay(party.displayName, party.name) };
}

/**
 * The transfer of a bank slip; null without a usable time. The ISO timestamp SlipOK adds wins; otherwise
 * the slip's date and time are Bangkok time.
 */
export function transferOfBankSlip(slip: BankSlip): VerifiedTransfer | null {
  const occurred_at = slip.transTimestamp ?? (slip.transDate !== undefined && slip.transTime !== undefined ? bangkokTimeOf(slip.transDate, slip.transTime) : null);
  if (occurred_at === null) return null;
  return {
    sending_bank_code: slip.sendingBank,
    trans_ref: slip.transRef,
    amount_minor: slip.amount,
    occurred_at,
    sender: bankSlipPartyOf(slip.sendingBank, slip.sender),
    receiver: bankSlipPartyOf(slip.receivingBank, slip.receiver),
  };
}

/** A bank slip in a provider's answer, checked against the query; malformed when it does not parse. */
export function lookupOfBankSlip(document: unknown, query: TransferQuery): TransferLookup {
  const parsed = bankSlipSchema.safeParse(document);
  if (!parsed.success) return MALFORMED;
  const transfer = transferOfBankSlip(parsed.data);
  return transfer === null ? MALFORMED : foundIfAbout(transfer, query);
}
