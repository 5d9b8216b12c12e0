import { z } from 'zod';
import { minorSchema, openEnum, timestampSchema, type Describes } from '../http/response-fields.ts';
import type { BalanceTransactionView, BalanceView } from './service.ts';
import { BALANCE_TRANSACTION_TYPES } from './types.ts';

/** Response schemas of the wallet ledger's resources (spec, balance_transaction and Wallet balance). */

const bucket = z.enum(['available', 'pending_clearing', 'reserved']);

const balancesFields = {
  available_minor: minorSchema.meta({ description: 'The only number to decide withdrawals on.' }),
  pending_clearing_minor: minorSchema.meta({ description: 'Credited but less than 72 hours old.' }),
  reserved_minor: minorSchema.meta({ description: 'Locked against open withdrawals and refunds, principal plus fee.' }),
};

export const balanceTransactionSchema = z
  .object({
    id: z.string(),
    object: z.literal('balance_transaction'),
    type: openEnum(BALANCE_TRANSACTION_TYPES),
    direction: z.enum(['credit', 'debit']),
    amount_minor: minorSchema,
    currency: z.literal('THB'),
    bucket_from: bucket.nullable(),
    bucket_to: bucket.nullable(),
    available_at: timestampSchema.optional(),
    balance_after: z.object(balancesFields).meta({ description: 'For checking only; never overwrite local totals with it.' }),
    source: z.object({ type: z.string(), id: z.string() }),
    reverses_balance_transaction_id: z.string().optional(),
    reason_code: z.string().optional(),
    reason_display_th: z.string().optional(),
    cleared_from_balance_transaction_id: z.string().optional(),
    livemode: z.boolean(),
    created_at: timestampSchema,
  })
  .meta({ id: 'balance_transaction', description: 'Immutable: no `version`, no `previous_attributes`.' });

export const balanceSchema = z
  .object({ object: z.literal('balance'), ...balancesFields, currency: z.literal('THB'), livemode: z.boolean(), as_of: timestampSchema })
  .meta({ id: 'balance' });

/** GET /v1/bo/wallet: the balance, and the back office's check of the wallet against its movements. */
export const walletSchema = z
  .object({
    object: z.literal('wallet'),
    ...balancesFields,
    currency: z.literal('THB'),
    livemode: z.boolean(),
    as_of: timestampSchema,
    merchant_id: z.string(),
    white_label_id: z.string(),
    next_clearing_at: timestampSchema.nullable(),
    movements: z.number().int(),
    ledger_consistent: z.boolean(),
  })
  .meta({ id: 'wallet' });

const _balanceTransaction: Describes<typeof balanceTransactionSchema, BalanceTransactionView> = true;
const _balance: Describes<typeof balanceSchema, BalanceView> = true;
void [_balanceTransaction, _balance];
