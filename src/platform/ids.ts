import crypto from 'node:crypto';
import { monotonicFactory } from 'ulidx';

/**
 * Every identifier is a type prefix plus a ULID (spec, "Identifiers"). The prefixes are a closed list
 * here so a typo cannot mint an id of an unknown kind.
 */
export const ID_PREFIXES = {
  deposit: 'dep_',
  deposit_leg: 'dleg_',
  withdrawal: 'wdr_',
  withdrawal_leg: 'wleg_',
  balance_transaction: 'btxn_',
  event: 'evt_',
  request: 'req_',
  merchant: 'mch_',
  brand: 'wl_',
  slip_receipt: 'rcpt_',
  sender: 'snd_',
  beneficiary: 'ben_',
  claim: 'clm_',
  api_key: 'key_',
  backoffice_credential: 'boc_',
  staff_identity: 'stf_',
  job: 'job_',
  audit: 'aud_',
  review_decision: 'rvd_',
  deposit_evidence: 'evd_',
  dispute: 'dsp_',
  dispute_evidence: 'dse_',
  test_clock: 'clock_',
  console_session: 'bos_',
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

/**
 * ulidx draws its 16 random characters one `randomFillSync` call each, which costs a system call
 * per character on every id; this source hands out the same cryptographic randomness from a pooled
 * buffer refilled 4 KiB at a time.
 */
const randomPool = Buffer.alloc(4096);
let randomOffset = randomPool.length;

function pooledRandom(): number {
  if (randomOffset + 4 > randomPool.length) {
    crypto.randomFillSync(randomPool);
    randomOffset = 0;
  }
  const value = randomPool.readUInt32BE(randomOffset);
  randomOffset += 4;
  return value / 0x1_0000_0000;
}

const nextUlid = monotonicFactory(pooledRandom);

export function newId(kind: IdKind): string {
  return ID_PREFIXES[kind] + nextUlid();
}

const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** True when the text is an id of the given kind; used to answer 404 early without a query. */
export function isIdOfKind(text: string, kind: IdKind): boolean {
  const prefix = ID_PREFIXES[kind];
  return text.startsWith(prefix) && ULID_PATTERN.test(text.slice(prefix.length));
}
