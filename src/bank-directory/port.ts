/**
 * The bank directory port: what the service asks of the Thai interbank system before money moves.
 * "Who owns this account" (for beneficiary name verification) and "is this bank available, for which
 * side" (sender or receiver). Two adapters serve it: the sandbox bank (`sandbox-adapter.ts`, test
 * mode, a simulated directory in our own tables) and, later, a live adapter over an HTTP provider.
 * Wiring decides which adapter serves which mode; an adapter never falls back to the other.
 */

export type AccountStatus = 'open' | 'closed' | 'frozen';
export type BankSide = 'sender' | 'receiver';

export interface AccountLookup {
  white_label_id: string;
  /** Whose lookup it is: the sandbox directory answers each merchant from its own accounts and the brand's baseline. */
  merchant_id: string;
  livemode: boolean;
  bank_code: string;
  account_number: string;
}

export type AccountLookupResult =
  | { outcome: 'found'; holder_name_th: string; holder_name_en: string | null; account_status: AccountStatus }
  | { outcome: 'not_found' }
  /** The bank cannot answer now (unknown to us, or switched off): retry later or ask a human. */
  | { outcome: 'bank_unavailable' };

export interface BankAvailability {
  available: boolean;
  /** End-user text shown while the bank is unavailable (from the bank list), when there is one. */
  message_th?: string;
}

export interface BankDirectory {
  /** Who holds this account, as the holding bank records it. Never throws for a business outcome. */
  lookupAccount(request: AccountLookup): Promise<AccountLookupResult>;
  /**
   * Whether the bank accepts orders on this side. Asynchronous because every adapter reads it from
   * somewhere (the `banks` table for the sandbox, the provider for live).
   */
  bankAvailability(request: { bank_code: string; side: BankSide }): Promise<BankAvailability>;
}

/**
 * Name verification: normalise both names, then compare exactly.
 *
 * Why exact after normalisation, not fuzzy: the comparison guards payouts against a mistyped or
 * misdirected account, so a false "match" pays the wrong person while a false "mismatch" only sends
 * the beneficiary back to be corrected or to review. Thai names of different people can differ by a
 * single tone mark or vowel (an edit distance of 1), so no similarity threshold separates "typo of
 * the same person" from "another person"; a threshold would also be impossible to explain to a
 * merchant or an auditor. Normalisation removes only what never distinguishes two holders:
 * surrounding and repeated whitespace, invisible joiners, letter case of Latin text, and a leading
 * honorific (a bank may or may not store "นาย" / "Mr." with the name). English names are compared
 * against the bank's own English name only; we never transliterate Thai (Somchai / Somchay).
 */

/** Leading Thai honorifics, longest first so that นางสาว is not read as นาง + สาว. Thai writes them
 * attached to the first name (นายสมชาย) or spaced (นาย สมชาย); both are stripped. */
const THAI_HONORIFICS = ['นางสาว', 'น.ส.', 'นาย', 'นาง', 'ด.ช.', 'ด.ญ.'] as const;
/** Leading English honorifics (after case folding), with an optional dot, then a separator. */
const ENGLISH_HONORIFIC = /^(?:mrs|mr|miss|ms)(?:\.\s*|\s+)/;
/** Zero-width space and joiners, and the BOM: Thai text often carries U+200B as a word break. */
const INVISIBLE = /[\u200b-\u200d\u2060\ufeff]/g;

export function normaliseName(name: string): string {
  let text = name.normalize('NFC').replace(INVISIBLE, '').replace(/\s+/gu, ' ').trim().toLowerCase();
  const thai = THAI_HONORIFICS.find((honorific) => text.startsWith(honorific));
  if (thai !== undefined) {
    text = text.slice(thai.length).trim();
  } else {
    text = text.replace(ENGLISH_HONORIFIC, '').trim();
  }
  return text;
}

/**
 * True when the declared name equals the holder's Thai name or English name after normalisation.
 * An empty declared name (or one that is only an honorific) never matches.
 */
export function namesMatch(declared: string, holder: { holder_name_th: string; holder_name_en: string | null }): boolean {
  const wanted = normaliseName(declared);
  if (wanted === '') return false;
  if (wanted === normaliseName(holder.holder_name_th)) return true;
  return holder.holder_name_en !== null && wanted === normaliseName(holder.holder_name_en);
}
