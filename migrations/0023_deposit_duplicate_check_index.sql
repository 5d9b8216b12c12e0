-- The duplicate check of a deposit creation (`duplicate_open_deposit`: an order of the same merchant awaiting
-- payment of the same amount from the same sender account, src/deposits/repository.ts creationConflictsPart)
-- had no index of its own: it was answered by scanning every open order of the merchant (through
-- deposit_orders_open_by_user or deposit_orders_listing) and filtering on the sender. Its cost grew with
-- the merchant's open orders, on every creation. This index answers it from the sender account directly.
CREATE INDEX deposit_orders_duplicate_sender ON deposit_orders (white_label_id, merchant_id, livemode, sender_account_hmac)
  WHERE status = 'awaiting_payment';
