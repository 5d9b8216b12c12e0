-- The spec's cancel_reason_code for a merchant's cancel is `merchant_request`; withdrawals stored
-- `merchant_requested` until this fix. Events already sent keep what they said (they are immutable).
UPDATE withdrawal_orders SET close_reason_code = 'merchant_request' WHERE close_reason_code = 'merchant_requested';
