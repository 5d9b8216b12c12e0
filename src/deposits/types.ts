/** Row types of the deposits module. Column meanings are in migrations/0007_deposits.sql. */

export const DEPOSIT_STATUSES = [
  'awaiting_liquidity',
  'awaiting_payment',
  'slip_processing',
  'under_review',
  'settled',
  'expired',
  'canceled',
  'rejected',
  'reversed',
] as const;
export type DepositStatus = (typeof DEPOSIT_STATUSES)[number];

export type FillPreference = 'any' | 'internal_only';
export type CanceledBy = 'merchant' | 'end_user' | 'system';
export type DepositLegStatus = 'reserved' | 'released' | 'filled';

export interface DepositAccount {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
}

export interface DepositPolicyRow {
  white_label_id: string;
  livemode: boolean;
  min_amount_minor: number;
  max_amount_minor: number;
  default_expires_in_seconds: number;
  max_expires_in_seconds: number;
  max_legs: number;
  liquidity_wait_seconds: number;
  created_at: Date;
  updated_at: Date;
}

export interface DepositRow extends DepositAccount {
  deposit_id: string;
  version: number;
  status: DepositStatus;
  merchant_reference: string;
  end_user_ref: string;
  amount_minor: number;
  sender_bank_code: string;
  sender_account_sealed: string;
  sender_account_hmac: string;
  sender_account_last4: string;
  sender_name_th: string;
  sender_name_en: string | null;
  sender_id: string | null;
  device_fingerprint: string | null;
  client: Record<string, string> | null;
  fill_preference: FillPreference;
  min_ttl_seconds: number | null;
  expires_in_seconds: number;
  return_url: string | null;
  metadata: Record<string, string> | null;
  liquidity_source: 'internal' | 'external_gateway' | null;
  expires_at: Date;
  wait_started_at: Date | null;
  late_slip_accepted_until: Date | null;
  expired_reason: string | null;
  canceled_by: CanceledBy | null;
  cancel_reason_code: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface DepositLegRow {
  white_label_id: string;
  deposit_id: string;
  leg_ref: string;
  sequence: number;
  amount_minor: number;
  expires_at: Date;
  status: DepositLegStatus;
  withdrawal_id: string;
  withdrawal_leg_ref: string;
  receiver_bank_code: string;
  receiver_bank_name_th: string;
  receiver_account_last4: string;
  receiver_name_masked: string;
  created_at: Date;
  updated_at: Date;
}
