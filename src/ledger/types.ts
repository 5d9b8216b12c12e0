/** Types of the wallet ledger. Column meanings are in migrations/0004_wallet_ledger.sql. */
export type Bucket = 'available' | 'pending_clearing' | 'reserved';

export const BALANCE_TRANSACTION_TYPES = [
  'deposit_settled',
  'clearing_released',
  'withdrawal_reserved',
  'withdrawal_settled',
  'withdrawal_released',
  'fee',
  'reversal',
  'adjustment',
] as const;
export type BalanceTransactionType = (typeof BALANCE_TRANSACTION_TYPES)[number];
export type Direction = 'credit' | 'debit';

/**
 * Which bucket each movement type may leave and enter (null is outside the wallet), and so its
 * direction: a movement into `available` or into the wallet from outside is a credit, anything that
 * takes money out of `available` or out of the wallet is a debit. This table is the only place the
 * shape of a movement is decided.
 */
export const MOVEMENT_RULES: Record<BalanceTransactionType, ReadonlyArray<{ from: Bucket | null; to: Bucket | null; direction: Direction }>> = {
  deposit_settled: [{ from: null, to: 'pending_clearing', direction: 'credit' }],
  clearing_released: [{ from: 'pending_clearing', to: 'available', direction: 'credit' }],
  withdrawal_reserved: [{ from: 'available', to: 'reserved', direction: 'debit' }],
  withdrawal_settled: [{ from: 'reserved', to: null, direction: 'debit' }],
  withdrawal_released: [{ from: 'reserved', to: 'available', direction: 'credit' }],
  fee: [
    { from: 'reserved', to: null, direction: 'debit' },
    { from: 'available', to: null, direction: 'debit' },
  ],
  // A reversal takes back a deposit credit (debit), or brings back a withdrawal fill that did not
  // reach its beneficiary (credit: into reserved while its order is live, else into available).
  reversal: [
    { from: 'pending_clearing', to: null, direction: 'debit' },
    { from: 'available', to: null, direction: 'debit' },
    { from: null, to: 'reserved', direction: 'credit' },
    { from: null, to: 'available', direction: 'credit' },
  ],
  adjustment: [
    { from: null, to: 'available', direction: 'credit' },
    { from: 'available', to: null, direction: 'debit' },
  ],
};

/** Types that may leave `available` below zero: the debt then stays visible as a negative balance. */
export const MAY_OVERDRAW_AVAILABLE: ReadonlySet<BalanceTransactionType> = new Set(['reversal', 'adjustment']);

export interface WalletAccount {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
}

export interface Balances {
  available_minor: number;
  pending_clearing_minor: number;
  reserved_minor: number;
}

export interface WalletRow extends WalletAccount, Balances {
  last_sequence: number;
  created_at: Date;
  updated_at: Date;
}

export interface BalanceTransactionRow extends WalletAccount {
  balance_transaction_id: string;
  sequence: number;
  movement_key: string;
  type: BalanceTransactionType;
  direction: Direction;
  amount_minor: number;
  currency: 'THB';
  bucket_from: Bucket | null;
  bucket_to: Bucket | null;
  available_at: Date | null;
  available_after: number;
  pending_clearing_after: number;
  reserved_after: number;
  source_type: string;
  source_id: string;
  reverses_balance_transaction_id: string | null;
  reason_code: string | null;
  reason_display_th: string | null;
  cleared_from_balance_transaction_id: string | null;
  created_at: Date;
}

export type ClearingStatus = 'pending' | 'held' | 'released' | 'reversed';

export interface ClearingRow extends WalletAccount {
  credit_balance_transaction_id: string;
  amount_minor: number;
  available_at: Date | null;
  status: ClearingStatus;
  hold_reason: string | null;
  released_balance_transaction_id: string | null;
  created_at: Date;
  updated_at: Date;
}
