import { sha256Hex } from '../platform/crypto.ts';
import type { LateSlipClaimEvidence } from './types.ts';

/** What makes each kind of claim of a deposit happen once. */

/**
 * What makes a claim for a transfer after settlement happen once: the transfer's bank identity
 * (`transfer_key`, the sending bank and reference the slip pipeline verified).
 */
export function additionalTransferClaimKey(deposit_id: string, transfer_key: string): string {
  return `additional_transfer:${deposit_id}:${transfer_key}`;
}

/**
 * What makes a late-slip claim happen once: the transfer's reference when the payer gave one (whoever
 * opens it, end user or operator), else the evidence itself, so that the same submission repeated is the
 * same claim while a different account of another transfer is a claim of its own.
 */
export function lateSlipClaimKey(deposit_id: string, evidence: LateSlipClaimEvidence): string {
  if (evidence.trans_ref !== undefined) return `late_slip:${deposit_id}:ref:${evidence.trans_ref.toUpperCase()}`;
  const canonical = JSON.stringify(Object.entries(evidence).sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0)));
  return `late_slip:${deposit_id}:evidence:${sha256Hex(canonical)}`;
}
