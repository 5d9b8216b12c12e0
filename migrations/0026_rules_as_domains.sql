-- Issue 15: the CHECK constraints' cost per statement (docs/decisions.md, "Write paths, seventh slice").
--
-- PostgreSQL prepares every CHECK constraint of a table from its stored text on every statement that writes the
-- table, whichever columns the statement sets (ExecRelCheck: stringToNode, the planner, ExecPrepareExpr). A
-- domain's constraints are prepared once per session (the type cache) and checked only where a value is assigned
-- to the column, and a PL/pgSQL function keeps its compiled body and expression plans for the session.
--
-- So, with every rule kept and named as before:
-- * a CHECK on one column becomes a domain over the column's type, named <table>_<column>, whose constraint keeps
--   the CHECK's name and expression (VALUE for the column);
-- * a table with two or more CHECKs over several columns keeps one CHECK, <table>_rules, calling
--   <table>_rules_hold(...): the function tests each rule in the order of their names and raises check_violation
--   naming the rule that fails, with the message PostgreSQL gives for a failed CHECK;
-- * a table with one CHECK over several columns keeps it as it is.
--
-- Generated once from the catalog of a database migrated to 0025 and read through; like every migration it is never
-- edited. test/schema-rules.test.ts proves that every rule of 0025 is here with its name and expression, and keeps the
-- shape (no CHECK over one column, at most one CHECK over several per table) for later migrations.

-- The rules of one column, as domains.

CREATE DOMAIN api_keys_api_key_id AS text CONSTRAINT api_keys_api_key_id_check CHECK ((VALUE ~~ 'key\_%'::text));
CREATE DOMAIN api_keys_key_hash AS text CONSTRAINT api_keys_key_hash_check CHECK ((length(VALUE) = 64));
CREATE DOMAIN api_keys_key_last4 AS text CONSTRAINT api_keys_key_last4_check CHECK ((length(VALUE) = 4));
CREATE DOMAIN api_keys_status AS text CONSTRAINT api_keys_status_check CHECK ((VALUE = ANY (ARRAY['active'::text, 'suspended'::text, 'revoked'::text])));
CREATE DOMAIN audit_log_audit_id AS text CONSTRAINT audit_log_audit_id_check CHECK ((VALUE ~~ 'aud\_%'::text));
CREATE DOMAIN backoffice_credentials_credential_id AS text CONSTRAINT backoffice_credentials_credential_id_check CHECK ((VALUE ~~ 'boc\_%'::text));
CREATE DOMAIN backoffice_credentials_name AS text CONSTRAINT backoffice_credentials_name_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 200)));
CREATE DOMAIN backoffice_credentials_role AS text CONSTRAINT backoffice_credentials_role_check CHECK ((VALUE = ANY (ARRAY['platform_admin'::text, 'operator'::text, 'reviewer'::text])));
CREATE DOMAIN backoffice_credentials_status AS text CONSTRAINT backoffice_credentials_status_check CHECK ((VALUE = ANY (ARRAY['active'::text, 'suspended'::text, 'revoked'::text])));
CREATE DOMAIN backoffice_credentials_token_hash AS text CONSTRAINT backoffice_credentials_token_hash_check CHECK ((length(VALUE) = 64));
CREATE DOMAIN balance_transactions_amount_minor AS bigint CONSTRAINT balance_transactions_amount_minor_check CHECK (((VALUE > 0) AND (VALUE <= '9007199254740991'::bigint)));
CREATE DOMAIN balance_transactions_balance_transaction_id AS text CONSTRAINT balance_transactions_balance_transaction_id_check CHECK ((VALUE ~~ 'btxn\_%'::text));
CREATE DOMAIN balance_transactions_bucket_from AS text CONSTRAINT balance_transactions_bucket_from_check CHECK ((VALUE = ANY (ARRAY['available'::text, 'pending_clearing'::text, 'reserved'::text])));
CREATE DOMAIN balance_transactions_bucket_to AS text CONSTRAINT balance_transactions_bucket_to_check CHECK ((VALUE = ANY (ARRAY['available'::text, 'pending_clearing'::text, 'reserved'::text])));
CREATE DOMAIN balance_transactions_currency AS text CONSTRAINT balance_transactions_currency_check CHECK ((VALUE = 'THB'::text));
CREATE DOMAIN balance_transactions_direction AS text CONSTRAINT balance_transactions_direction_check CHECK ((VALUE = ANY (ARRAY['credit'::text, 'debit'::text])));
CREATE DOMAIN balance_transactions_pending_clearing_after AS bigint CONSTRAINT balance_transactions_pending_clearing_after_check CHECK ((VALUE >= 0));
CREATE DOMAIN balance_transactions_reserved_after AS bigint CONSTRAINT balance_transactions_reserved_after_check CHECK ((VALUE >= 0));
CREATE DOMAIN balance_transactions_sequence AS bigint CONSTRAINT balance_transactions_sequence_check CHECK ((VALUE > 0));
CREATE DOMAIN balance_transactions_type AS text CONSTRAINT balance_transactions_type_check CHECK ((VALUE = ANY (ARRAY['deposit_settled'::text, 'clearing_released'::text, 'withdrawal_reserved'::text, 'withdrawal_settled'::text, 'withdrawal_released'::text, 'fee'::text, 'reversal'::text, 'adjustment'::text])));
CREATE DOMAIN banks_bank_code AS text CONSTRAINT banks_bank_code_check CHECK ((VALUE ~ '^[0-9]{3}$'::text));
CREATE DOMAIN banks_sides AS text[] CONSTRAINT banks_sides_check CHECK ((VALUE <@ ARRAY['sender'::text, 'receiver'::text]));
CREATE DOMAIN beneficiaries_account_name_en AS text CONSTRAINT beneficiaries_account_name_en_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 100)));
CREATE DOMAIN beneficiaries_account_name_th AS text CONSTRAINT beneficiaries_account_name_th_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 100)));
CREATE DOMAIN beneficiaries_account_number_hmac AS text CONSTRAINT beneficiaries_account_number_hmac_check CHECK ((VALUE ~ '^[0-9a-f]{64}$'::text));
CREATE DOMAIN beneficiaries_account_number_last4 AS text CONSTRAINT beneficiaries_account_number_last4_check CHECK ((VALUE ~ '^[0-9]{4}$'::text));
CREATE DOMAIN beneficiaries_beneficiary_id AS text CONSTRAINT beneficiaries_beneficiary_id_check CHECK ((VALUE ~~ 'ben\_%'::text));
CREATE DOMAIN beneficiaries_end_user_ref AS text CONSTRAINT beneficiaries_end_user_ref_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 64)));
CREATE DOMAIN beneficiaries_promptpay_id_last4 AS text CONSTRAINT beneficiaries_promptpay_id_last4_check CHECK ((VALUE ~ '^[0-9]{4}$'::text));
CREATE DOMAIN beneficiaries_status AS text CONSTRAINT beneficiaries_status_check CHECK ((VALUE = ANY (ARRAY['pending_verification'::text, 'verified'::text, 'rejected'::text])));
CREATE DOMAIN beneficiaries_verification_failure_code AS text CONSTRAINT beneficiaries_verification_failure_code_check CHECK ((VALUE = ANY (ARRAY['account_not_found'::text, 'account_closed'::text, 'account_frozen'::text, 'name_mismatch'::text, 'bank_unavailable'::text])));
CREATE DOMAIN beneficiaries_version AS integer CONSTRAINT beneficiaries_version_check CHECK ((VALUE >= 1));
CREATE DOMAIN brands_checkout_base_url AS text CONSTRAINT brands_checkout_base_url_check CHECK (((VALUE IS NULL) OR (((length(VALUE) >= 8) AND (length(VALUE) <= 300)) AND (VALUE ~ '^https?://[^/?#@]+$'::text))));
CREATE DOMAIN brands_name AS text CONSTRAINT brands_name_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 200)));
CREATE DOMAIN brands_status AS text CONSTRAINT brands_status_check CHECK ((VALUE = ANY (ARRAY['active'::text, 'suspended'::text])));
CREATE DOMAIN brands_white_label_id AS text CONSTRAINT brands_white_label_id_check CHECK ((VALUE ~~ 'wl\_%'::text));
CREATE DOMAIN claims_amount_minor AS bigint CONSTRAINT claims_amount_minor_check CHECK ((VALUE > 0));
CREATE DOMAIN claims_cause AS text CONSTRAINT claims_cause_check CHECK ((VALUE = ANY (ARRAY['same_transfer_excess'::text, 'additional_transfer'::text, 'late_slip'::text])));
CREATE DOMAIN claims_claim_id AS text CONSTRAINT claims_claim_id_check CHECK ((VALUE ~~ 'clm\_%'::text));
CREATE DOMAIN claims_opened_by AS text CONSTRAINT claims_opened_by_check CHECK ((VALUE = ANY (ARRAY['end_user'::text, 'backoffice'::text, 'system'::text])));
CREATE DOMAIN claims_resolution_code AS text CONSTRAINT claims_resolution_code_check CHECK ((VALUE = ANY (ARRAY['refunded_to_payer'::text, 'credited_to_merchant_outside_service'::text, 'no_transfer_found'::text, 'duplicate_of_other_claim'::text])));
CREATE DOMAIN claims_resolution_note AS text CONSTRAINT claims_resolution_note_check CHECK (((VALUE IS NULL) OR ((length(VALUE) >= 20) AND (length(VALUE) <= 2000))));
CREATE DOMAIN claims_status AS text CONSTRAINT claims_status_check CHECK ((VALUE = ANY (ARRAY['open'::text, 'investigating'::text, 'resolved'::text, 'rejected'::text])));
CREATE DOMAIN claims_version AS integer CONSTRAINT claims_version_check CHECK ((VALUE > 0));
CREATE DOMAIN clearings_amount_minor AS bigint CONSTRAINT clearings_amount_minor_check CHECK ((VALUE > 0));
CREATE DOMAIN clearings_status AS text CONSTRAINT clearings_status_check CHECK ((VALUE = ANY (ARRAY['pending'::text, 'held'::text, 'released'::text, 'reversed'::text])));
CREATE DOMAIN deposit_evidence_evidence_id AS text CONSTRAINT deposit_evidence_evidence_id_check CHECK ((VALUE ~~ 'evd\_%'::text));
CREATE DOMAIN deposit_evidence_kind AS text CONSTRAINT deposit_evidence_kind_check CHECK ((VALUE = ANY (ARRAY['bank_statement_line'::text, 'chat_transcript'::text, 'id_document_ref'::text, 'other'::text])));
CREATE DOMAIN deposit_evidence_note AS text CONSTRAINT deposit_evidence_note_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 2000)));
CREATE DOMAIN deposit_evidence_reference AS text CONSTRAINT deposit_evidence_reference_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 200)));
CREATE DOMAIN deposit_legs_amount_minor AS bigint CONSTRAINT deposit_legs_amount_minor_check CHECK ((VALUE > 0));
CREATE DOMAIN deposit_legs_destination AS text CONSTRAINT deposit_legs_destination_check CHECK ((VALUE = ANY (ARRAY['withdrawal'::text, 'gateway'::text])));
CREATE DOMAIN deposit_legs_leg_ref AS text CONSTRAINT deposit_legs_leg_ref_check CHECK ((VALUE ~~ 'dleg\_%'::text));
CREATE DOMAIN deposit_legs_paid_minor AS bigint CONSTRAINT deposit_legs_paid_minor_check CHECK ((VALUE >= 0));
CREATE DOMAIN deposit_legs_sequence AS integer CONSTRAINT deposit_legs_sequence_check CHECK ((VALUE > 0));
CREATE DOMAIN deposit_legs_status AS text CONSTRAINT deposit_legs_status_check CHECK ((VALUE = ANY (ARRAY['reserved'::text, 'released'::text, 'filled'::text])));
CREATE DOMAIN deposit_orders_amount_minor AS bigint CONSTRAINT deposit_orders_amount_minor_check CHECK (((VALUE > 0) AND ((VALUE % (100)::bigint) = 0) AND (VALUE <= '1000000000000'::bigint)));
CREATE DOMAIN deposit_orders_canceled_by AS text CONSTRAINT deposit_orders_canceled_by_check CHECK ((VALUE = ANY (ARRAY['merchant'::text, 'end_user'::text, 'system'::text])));
CREATE DOMAIN deposit_orders_deposit_id AS text CONSTRAINT deposit_orders_deposit_id_check CHECK ((VALUE ~~ 'dep\_%'::text));
CREATE DOMAIN deposit_orders_end_user_ref AS text CONSTRAINT deposit_orders_end_user_ref_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 64)));
CREATE DOMAIN deposit_orders_expires_in_seconds AS integer CONSTRAINT deposit_orders_expires_in_seconds_check CHECK (((VALUE >= 60) AND (VALUE <= 86400)));
CREATE DOMAIN deposit_orders_fill_preference AS text CONSTRAINT deposit_orders_fill_preference_check CHECK ((VALUE = ANY (ARRAY['any'::text, 'internal_only'::text])));
CREATE DOMAIN deposit_orders_liquidity_source AS text CONSTRAINT deposit_orders_liquidity_source_check CHECK ((VALUE = ANY (ARRAY['internal'::text, 'external_gateway'::text])));
CREATE DOMAIN deposit_orders_merchant_reference AS text CONSTRAINT deposit_orders_merchant_reference_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 64)));
CREATE DOMAIN deposit_orders_min_ttl_seconds AS integer CONSTRAINT deposit_orders_min_ttl_seconds_check CHECK (((VALUE >= 0) AND (VALUE <= 86400)));
CREATE DOMAIN deposit_orders_sender_bank_code AS text CONSTRAINT deposit_orders_sender_bank_code_check CHECK ((VALUE ~ '^[0-9]{3}$'::text));
CREATE DOMAIN deposit_orders_settled_via AS text CONSTRAINT deposit_orders_settled_via_check CHECK ((VALUE = ANY (ARRAY['auto'::text, 'review'::text])));
CREATE DOMAIN deposit_orders_slip_attempts AS integer CONSTRAINT deposit_orders_slip_attempts_check CHECK (((VALUE >= 0) AND (VALUE <= 3)));
CREATE DOMAIN deposit_orders_status AS text CONSTRAINT deposit_orders_status_check CHECK ((VALUE = ANY (ARRAY['awaiting_liquidity'::text, 'awaiting_payment'::text, 'slip_processing'::text, 'under_review'::text, 'settled'::text, 'expired'::text, 'canceled'::text, 'rejected'::text, 'reversed'::text])));
CREATE DOMAIN deposit_orders_version AS integer CONSTRAINT deposit_orders_version_check CHECK ((VALUE > 0));
CREATE DOMAIN deposit_policies_default_expires_in_seconds AS integer CONSTRAINT deposit_policies_default_expires_in_seconds_check CHECK (((VALUE >= 60) AND (VALUE <= 86400)));
CREATE DOMAIN deposit_policies_four_eyes_min_amount_minor AS bigint CONSTRAINT deposit_policies_four_eyes_min_amount_minor_check CHECK (((VALUE IS NULL) OR (VALUE > 0)));
CREATE DOMAIN deposit_policies_gateway_bank_code AS text CONSTRAINT deposit_policies_gateway_bank_code_check CHECK ((VALUE ~ '^[0-9]{3}$'::text));
CREATE DOMAIN deposit_policies_liquidity_wait_seconds AS integer CONSTRAINT deposit_policies_liquidity_wait_seconds_check CHECK (((VALUE >= 10) AND (VALUE <= 3600)));
CREATE DOMAIN deposit_policies_max_amount_minor AS bigint CONSTRAINT deposit_policies_max_amount_minor_check CHECK ((((VALUE % (100)::bigint) = 0) AND (VALUE <= '1000000000000'::bigint)));
CREATE DOMAIN deposit_policies_max_expires_in_seconds AS integer CONSTRAINT deposit_policies_max_expires_in_seconds_check CHECK (((VALUE >= 60) AND (VALUE <= 86400)));
CREATE DOMAIN deposit_policies_max_legs AS integer CONSTRAINT deposit_policies_max_legs_check CHECK (((VALUE >= 1) AND (VALUE <= 10)));
CREATE DOMAIN deposit_policies_min_amount_minor AS bigint CONSTRAINT deposit_policies_min_amount_minor_check CHECK (((VALUE > 0) AND ((VALUE % (100)::bigint) = 0)));
CREATE DOMAIN event_sequences_last_sequence AS bigint CONSTRAINT event_sequences_last_sequence_check CHECK ((VALUE >= 0));
CREATE DOMAIN events_event_id AS text CONSTRAINT events_event_id_check CHECK ((VALUE ~~ 'evt\_%'::text));
CREATE DOMAIN events_sequence AS bigint CONSTRAINT events_sequence_check CHECK ((VALUE > 0));
CREATE DOMAIN fee_schedules_channel AS text CONSTRAINT fee_schedules_channel_check CHECK ((VALUE = ANY (ARRAY['deposit'::text, 'withdrawal'::text])));
CREATE DOMAIN fee_schedules_fixed_fee_minor AS bigint CONSTRAINT fee_schedules_fixed_fee_minor_check CHECK (((VALUE >= 0) AND (VALUE <= '1000000000000'::bigint)));
CREATE DOMAIN fee_schedules_merchant_id AS text CONSTRAINT fee_schedules_merchant_id_check CHECK ((VALUE ~~ 'mch\_%'::text));
CREATE DOMAIN fee_schedules_processing_fee_bps AS integer CONSTRAINT fee_schedules_processing_fee_bps_check CHECK (((VALUE >= 0) AND (VALUE <= 10000)));
CREATE DOMAIN fee_schedules_vat_bps AS integer CONSTRAINT fee_schedules_vat_bps_check CHECK (((VALUE >= 0) AND (VALUE <= 10000)));
CREATE DOMAIN force_complete_requests_claimed_verified_amount_minor AS bigint CONSTRAINT force_complete_requests_claimed_verified_amount_minor_check CHECK ((VALUE > 0));
CREATE DOMAIN force_complete_requests_derived_verified_amount_minor AS bigint CONSTRAINT force_complete_requests_derived_verified_amount_minor_check CHECK ((VALUE > 0));
CREATE DOMAIN force_complete_requests_note AS text CONSTRAINT force_complete_requests_note_check CHECK (((length(VALUE) >= 20) AND (length(VALUE) <= 2000)));
CREATE DOMAIN idempotency_records_idempotency_key AS text CONSTRAINT idempotency_records_idempotency_key_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 255)));
CREATE DOMAIN idempotency_records_request_fingerprint AS text CONSTRAINT idempotency_records_request_fingerprint_check CHECK ((length(VALUE) = 64));
CREATE DOMAIN idempotency_records_response_status AS integer CONSTRAINT idempotency_records_response_status_check CHECK (((VALUE >= 200) AND (VALUE <= 299)));
CREATE DOMAIN jobs_attempts AS integer CONSTRAINT jobs_attempts_check CHECK ((VALUE >= 0));
CREATE DOMAIN jobs_job_id AS text CONSTRAINT jobs_job_id_check CHECK ((VALUE ~~ 'job\_%'::text));
CREATE DOMAIN jobs_max_attempts AS integer CONSTRAINT jobs_max_attempts_check CHECK (((VALUE >= 1) AND (VALUE <= 100)));
CREATE DOMAIN jobs_status AS text CONSTRAINT jobs_status_check CHECK ((VALUE = ANY (ARRAY['pending'::text, 'running'::text, 'succeeded'::text, 'failed'::text])));
CREATE DOMAIN merchants_merchant_id AS text CONSTRAINT merchants_merchant_id_check CHECK ((VALUE ~~ 'mch\_%'::text));
CREATE DOMAIN merchants_name AS text CONSTRAINT merchants_name_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 200)));
CREATE DOMAIN merchants_status AS text CONSTRAINT merchants_status_check CHECK ((VALUE = ANY (ARRAY['active'::text, 'suspended'::text])));
CREATE DOMAIN rate_limit_counters_request_count AS integer CONSTRAINT rate_limit_counters_request_count_check CHECK ((VALUE >= 0));
CREATE DOMAIN request_nonces_nonce AS text CONSTRAINT request_nonces_nonce_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 128)));
CREATE DOMAIN review_decisions_action AS text CONSTRAINT review_decisions_action_check CHECK ((VALUE = ANY (ARRAY['approve'::text, 'reject'::text, 'escalate'::text])));
CREATE DOMAIN review_decisions_amount_source AS text CONSTRAINT review_decisions_amount_source_check CHECK ((VALUE = ANY (ARRAY['bank'::text, 'reviewer'::text])));
CREATE DOMAIN review_decisions_decision_id AS text CONSTRAINT review_decisions_decision_id_check CHECK ((VALUE ~~ 'rvd\_%'::text));
CREATE DOMAIN review_decisions_deposit_version AS integer CONSTRAINT review_decisions_deposit_version_check CHECK ((VALUE > 0));
CREATE DOMAIN review_decisions_effect AS text CONSTRAINT review_decisions_effect_check CHECK ((VALUE = ANY (ARRAY['approval_recorded'::text, 'settled'::text, 'rejected'::text, 'escalated'::text])));
CREATE DOMAIN review_decisions_idempotency_key AS text CONSTRAINT review_decisions_idempotency_key_check CHECK (((VALUE IS NULL) OR ((length(VALUE) >= 1) AND (length(VALUE) <= 255))));
CREATE DOMAIN review_decisions_note AS text CONSTRAINT review_decisions_note_check CHECK (((VALUE IS NULL) OR ((length(VALUE) >= 20) AND (length(VALUE) <= 2000))));
CREATE DOMAIN review_decisions_verified_amount_minor AS bigint CONSTRAINT review_decisions_verified_amount_minor_check CHECK (((VALUE IS NULL) OR (VALUE > 0)));
CREATE DOMAIN sandbox_bank_accounts_account_number AS text CONSTRAINT sandbox_bank_accounts_account_number_check CHECK ((VALUE ~ '^[0-9]{6,20}$'::text));
CREATE DOMAIN sandbox_bank_accounts_account_type AS text CONSTRAINT sandbox_bank_accounts_account_type_check CHECK ((VALUE = ANY (ARRAY['personal'::text, 'business'::text])));
CREATE DOMAIN sandbox_bank_accounts_holder_name_en AS text CONSTRAINT sandbox_bank_accounts_holder_name_en_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 100)));
CREATE DOMAIN sandbox_bank_accounts_holder_name_th AS text CONSTRAINT sandbox_bank_accounts_holder_name_th_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 100)));
CREATE DOMAIN sandbox_bank_accounts_status AS text CONSTRAINT sandbox_bank_accounts_status_check CHECK ((VALUE = ANY (ARRAY['open'::text, 'closed'::text, 'frozen'::text])));
CREATE DOMAIN sandbox_bank_transfers_amount_minor AS bigint CONSTRAINT sandbox_bank_transfers_amount_minor_check CHECK ((VALUE > 0));
CREATE DOMAIN sandbox_bank_transfers_receiver_account_number AS text CONSTRAINT sandbox_bank_transfers_receiver_account_number_check CHECK ((VALUE ~ '^[0-9]{6,20}$'::text));
CREATE DOMAIN sandbox_bank_transfers_receiver_name_th AS text CONSTRAINT sandbox_bank_transfers_receiver_name_th_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 100)));
CREATE DOMAIN sandbox_bank_transfers_sender_account_number AS text CONSTRAINT sandbox_bank_transfers_sender_account_number_check CHECK ((VALUE ~ '^[0-9]{6,20}$'::text));
CREATE DOMAIN sandbox_bank_transfers_sender_name_en AS text CONSTRAINT sandbox_bank_transfers_sender_name_en_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 100)));
CREATE DOMAIN sandbox_bank_transfers_sender_name_th AS text CONSTRAINT sandbox_bank_transfers_sender_name_th_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 100)));
CREATE DOMAIN sandbox_bank_transfers_trans_ref AS text CONSTRAINT sandbox_bank_transfers_trans_ref_check CHECK ((VALUE ~ '^[A-Z0-9]{10,30}$'::text));
CREATE DOMAIN senders_sender_id AS text CONSTRAINT senders_sender_id_check CHECK ((VALUE ~~ 'snd\_%'::text));
CREATE DOMAIN slip_receipts_blob_store AS text CONSTRAINT slip_receipts_blob_store_check CHECK ((VALUE = ANY (ARRAY['postgres'::text, 'filesystem'::text])));
CREATE DOMAIN slip_receipts_fingerprint AS text CONSTRAINT slip_receipts_fingerprint_check CHECK ((VALUE ~ '^[0-9a-f]{64}$'::text));
CREATE DOMAIN slip_receipts_idempotency_key AS text CONSTRAINT slip_receipts_idempotency_key_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 255)));
CREATE DOMAIN slip_receipts_image_sha256 AS text CONSTRAINT slip_receipts_image_sha256_check CHECK ((VALUE ~ '^[0-9a-f]{64}$'::text));
CREATE DOMAIN slip_receipts_media_type AS text CONSTRAINT slip_receipts_media_type_check CHECK ((VALUE = ANY (ARRAY['image/jpeg'::text, 'image/png'::text, 'image/webp'::text])));
CREATE DOMAIN slip_receipts_receipt_id AS text CONSTRAINT slip_receipts_receipt_id_check CHECK ((VALUE ~~ 'rcpt\_%'::text));
CREATE DOMAIN slip_receipts_shape AS text CONSTRAINT slip_receipts_shape_check CHECK ((VALUE = ANY (ARRAY['multipart'::text, 'json_base64'::text, 'reference'::text])));
CREATE DOMAIN slip_receipts_size_bytes AS integer CONSTRAINT slip_receipts_size_bytes_check CHECK (((VALUE >= 1) AND (VALUE <= 4194304)));
CREATE DOMAIN slip_receipts_status AS text CONSTRAINT slip_receipts_status_check CHECK ((VALUE = ANY (ARRAY['accepted'::text, 'claimed'::text, 'processed'::text])));
CREATE DOMAIN slip_transfers_amount_minor AS bigint CONSTRAINT slip_transfers_amount_minor_check CHECK ((VALUE > 0));
CREATE DOMAIN slip_transfers_sending_bank_code AS text CONSTRAINT slip_transfers_sending_bank_code_check CHECK ((VALUE ~ '^[0-9]{3}$'::text));
CREATE DOMAIN slip_transfers_trans_ref AS text CONSTRAINT slip_transfers_trans_ref_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 64)));
CREATE DOMAIN test_clocks_advance_job_runs AS integer CONSTRAINT test_clocks_advance_job_runs_check CHECK ((VALUE >= 0));
CREATE DOMAIN test_clocks_advance_slice AS integer CONSTRAINT test_clocks_advance_slice_check CHECK ((VALUE >= 0));
CREATE DOMAIN test_clocks_last_advance_job_runs AS integer CONSTRAINT test_clocks_last_advance_job_runs_check CHECK ((VALUE >= 0));
CREATE DOMAIN test_clocks_last_advance_outcome AS text CONSTRAINT test_clocks_last_advance_outcome_check CHECK ((VALUE = ANY (ARRAY['completed'::text, 'job_limit_reached'::text])));
CREATE DOMAIN test_clocks_livemode AS boolean CONSTRAINT test_clocks_livemode_check CHECK ((VALUE = false));
CREATE DOMAIN test_clocks_name AS text CONSTRAINT test_clocks_name_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 100)));
CREATE DOMAIN test_clocks_status AS text CONSTRAINT test_clocks_status_check CHECK ((VALUE = ANY (ARRAY['ready'::text, 'advancing'::text])));
CREATE DOMAIN test_clocks_test_clock_id AS text CONSTRAINT test_clocks_test_clock_id_check CHECK ((VALUE ~~ 'clock\_%'::text));
CREATE DOMAIN test_clocks_version AS integer CONSTRAINT test_clocks_version_check CHECK ((VALUE > 0));
CREATE DOMAIN wallets_last_sequence AS bigint CONSTRAINT wallets_last_sequence_check CHECK ((VALUE >= 0));
CREATE DOMAIN wallets_pending_clearing_minor AS bigint CONSTRAINT wallets_pending_clearing_minor_check CHECK ((VALUE >= 0));
CREATE DOMAIN wallets_reserved_minor AS bigint CONSTRAINT wallets_reserved_minor_check CHECK ((VALUE >= 0));
CREATE DOMAIN webhook_deliveries_attempt_count AS integer CONSTRAINT webhook_deliveries_attempt_count_check CHECK ((VALUE >= 0));
CREATE DOMAIN webhook_deliveries_delivery_id AS text CONSTRAINT webhook_deliveries_delivery_id_check CHECK ((VALUE ~~ 'whd\_%'::text));
CREATE DOMAIN webhook_deliveries_failure_reason AS text CONSTRAINT webhook_deliveries_failure_reason_check CHECK ((VALUE = ANY (ARRAY['attempts_exhausted'::text, 'endpoint_gone'::text, 'endpoint_disabled'::text, 'endpoint_deleted'::text])));
CREATE DOMAIN webhook_deliveries_round_attempts AS integer CONSTRAINT webhook_deliveries_round_attempts_check CHECK (((VALUE >= 0) AND (VALUE <= 11)));
CREATE DOMAIN webhook_deliveries_round AS integer CONSTRAINT webhook_deliveries_round_check CHECK ((VALUE > 0));
CREATE DOMAIN webhook_deliveries_status AS text CONSTRAINT webhook_deliveries_status_check CHECK ((VALUE = ANY (ARRAY['pending'::text, 'succeeded'::text, 'failed'::text])));
CREATE DOMAIN webhook_delivery_attempts_attempt AS integer CONSTRAINT webhook_delivery_attempts_attempt_check CHECK (((VALUE >= 1) AND (VALUE <= 11)));
CREATE DOMAIN webhook_delivery_attempts_attempt_sequence AS integer CONSTRAINT webhook_delivery_attempts_attempt_sequence_check CHECK ((VALUE > 0));
CREATE DOMAIN webhook_delivery_attempts_duration_ms AS integer CONSTRAINT webhook_delivery_attempts_duration_ms_check CHECK ((VALUE >= 0));
CREATE DOMAIN webhook_delivery_attempts_round AS integer CONSTRAINT webhook_delivery_attempts_round_check CHECK ((VALUE > 0));
CREATE DOMAIN webhook_delivery_attempts_status AS text CONSTRAINT webhook_delivery_attempts_status_check CHECK ((VALUE = ANY (ARRAY['succeeded'::text, 'failed'::text, 'lost'::text])));
CREATE DOMAIN webhook_endpoints_description AS text CONSTRAINT webhook_endpoints_description_check CHECK ((length(VALUE) <= 500));
CREATE DOMAIN webhook_endpoints_disabled_reason AS text CONSTRAINT webhook_endpoints_disabled_reason_check CHECK ((VALUE = ANY (ARRAY['operator'::text, 'endpoint_gone'::text])));
CREATE DOMAIN webhook_endpoints_endpoint_id AS text CONSTRAINT webhook_endpoints_endpoint_id_check CHECK ((VALUE ~~ 'we\_%'::text));
CREATE DOMAIN webhook_endpoints_status AS text CONSTRAINT webhook_endpoints_status_check CHECK ((VALUE = ANY (ARRAY['enabled'::text, 'disabled'::text, 'deleted'::text])));
CREATE DOMAIN webhook_endpoints_url AS text CONSTRAINT webhook_endpoints_url_check CHECK (((length(VALUE) >= 8) AND (length(VALUE) <= 2048)));
CREATE DOMAIN webhook_endpoints_version AS integer CONSTRAINT webhook_endpoints_version_check CHECK ((VALUE > 0));
CREATE DOMAIN webhook_feed_cursors_last_sequence AS bigint CONSTRAINT webhook_feed_cursors_last_sequence_check CHECK ((VALUE >= 0));
CREATE DOMAIN webhook_key_announcements_event_id AS text CONSTRAINT webhook_key_announcements_event_id_check CHECK ((VALUE ~~ 'evt\_%'::text));
CREATE DOMAIN webhook_key_announcements_kid AS text CONSTRAINT webhook_key_announcements_kid_check CHECK ((VALUE ~~ 'whk\_%'::text));
CREATE DOMAIN webhook_sandbox_key_rotation_runs_scenario_run_id AS text CONSTRAINT webhook_sandbox_key_rotation_runs_scenario_run_id_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 255)));
CREATE DOMAIN webhook_signing_keys_alg AS text CONSTRAINT webhook_signing_keys_alg_check CHECK ((VALUE = 'Ed25519'::text));
CREATE DOMAIN webhook_signing_keys_generation AS integer CONSTRAINT webhook_signing_keys_generation_check CHECK ((VALUE > 0));
CREATE DOMAIN webhook_signing_keys_kid AS text CONSTRAINT webhook_signing_keys_kid_check CHECK ((VALUE ~~ 'whk\_%'::text));
CREATE DOMAIN withdrawal_dispute_evidence_evidence_id AS text CONSTRAINT withdrawal_dispute_evidence_evidence_id_check CHECK ((VALUE ~~ 'dse\_%'::text));
CREATE DOMAIN withdrawal_dispute_evidence_kind AS text CONSTRAINT withdrawal_dispute_evidence_kind_check CHECK ((VALUE = ANY (ARRAY['bank_statement_line'::text, 'chat_transcript'::text, 'id_document_ref'::text, 'other'::text])));
CREATE DOMAIN withdrawal_dispute_evidence_note AS text CONSTRAINT withdrawal_dispute_evidence_note_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 2000)));
CREATE DOMAIN withdrawal_dispute_evidence_reference AS text CONSTRAINT withdrawal_dispute_evidence_reference_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 200)));
CREATE DOMAIN withdrawal_disputes_amount_minor AS bigint CONSTRAINT withdrawal_disputes_amount_minor_check CHECK ((VALUE > 0));
CREATE DOMAIN withdrawal_disputes_deposit_leg_ref AS text CONSTRAINT withdrawal_disputes_deposit_leg_ref_check CHECK ((VALUE ~~ 'dleg\_%'::text));
CREATE DOMAIN withdrawal_disputes_dispute_id AS text CONSTRAINT withdrawal_disputes_dispute_id_check CHECK ((VALUE ~~ 'dsp\_%'::text));
CREATE DOMAIN withdrawal_disputes_evidence_count AS integer CONSTRAINT withdrawal_disputes_evidence_count_check CHECK (((VALUE >= 0) AND (VALUE <= 10)));
CREATE DOMAIN withdrawal_disputes_kind AS text CONSTRAINT withdrawal_disputes_kind_check CHECK ((VALUE = ANY (ARRAY['non_receipt'::text, 'allocation_conflict'::text])));
CREATE DOMAIN withdrawal_disputes_leg_ref AS text CONSTRAINT withdrawal_disputes_leg_ref_check CHECK ((VALUE ~~ 'wleg\_%'::text));
CREATE DOMAIN withdrawal_disputes_note AS text CONSTRAINT withdrawal_disputes_note_check CHECK (((VALUE IS NULL) OR ((length(VALUE) >= 1) AND (length(VALUE) <= 2000))));
CREATE DOMAIN withdrawal_disputes_outcome AS text CONSTRAINT withdrawal_disputes_outcome_check CHECK ((VALUE = ANY (ARRAY['withdrawer'::text, 'depositor'::text])));
CREATE DOMAIN withdrawal_disputes_reason_code AS text CONSTRAINT withdrawal_disputes_reason_code_check CHECK ((VALUE ~ '^[A-Z][A-Z_]{1,63}$'::text));
CREATE DOMAIN withdrawal_disputes_resolution_note AS text CONSTRAINT withdrawal_disputes_resolution_note_check CHECK (((VALUE IS NULL) OR ((length(VALUE) >= 20) AND (length(VALUE) <= 2000))));
CREATE DOMAIN withdrawal_disputes_resolved_by AS text CONSTRAINT withdrawal_disputes_resolved_by_check CHECK ((VALUE = ANY (ARRAY['operator'::text, 'system'::text])));
CREATE DOMAIN withdrawal_disputes_status AS text CONSTRAINT withdrawal_disputes_status_check CHECK ((VALUE = ANY (ARRAY['open'::text, 'awaiting_decision'::text, 'resolved'::text])));
CREATE DOMAIN withdrawal_legs_amount_minor AS bigint CONSTRAINT withdrawal_legs_amount_minor_check CHECK ((VALUE > 0));
CREATE DOMAIN withdrawal_legs_fee_recognized_minor AS bigint CONSTRAINT withdrawal_legs_fee_recognized_minor_check CHECK ((VALUE >= 0));
CREATE DOMAIN withdrawal_legs_leg_ref AS text CONSTRAINT withdrawal_legs_leg_ref_check CHECK ((VALUE ~~ 'wleg\_%'::text));
CREATE DOMAIN withdrawal_legs_receipt_state AS text CONSTRAINT withdrawal_legs_receipt_state_check CHECK ((VALUE = ANY (ARRAY['awaiting_confirmation'::text, 'confirmed'::text, 'disputed'::text, 'reversed'::text])));
CREATE DOMAIN withdrawal_legs_sequence AS integer CONSTRAINT withdrawal_legs_sequence_check CHECK ((VALUE > 0));
CREATE DOMAIN withdrawal_legs_status AS text CONSTRAINT withdrawal_legs_status_check CHECK ((VALUE = ANY (ARRAY['reserved'::text, 'released'::text, 'filled'::text, 'reversed'::text])));
CREATE DOMAIN withdrawal_orders_amount_total_minor AS bigint CONSTRAINT withdrawal_orders_amount_total_minor_check CHECK (((VALUE > 0) AND (VALUE <= '1000000000000'::bigint)));
CREATE DOMAIN withdrawal_orders_closed_by AS text CONSTRAINT withdrawal_orders_closed_by_check CHECK ((VALUE = ANY (ARRAY['merchant'::text, 'operator'::text, 'system'::text])));
CREATE DOMAIN withdrawal_orders_end_user_ref AS text CONSTRAINT withdrawal_orders_end_user_ref_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 64)));
CREATE DOMAIN withdrawal_orders_fee_recognized_minor AS bigint CONSTRAINT withdrawal_orders_fee_recognized_minor_check CHECK ((VALUE >= 0));
CREATE DOMAIN withdrawal_orders_fee_total_minor AS bigint CONSTRAINT withdrawal_orders_fee_total_minor_check CHECK ((VALUE >= 0));
CREATE DOMAIN withdrawal_orders_filled_minor AS bigint CONSTRAINT withdrawal_orders_filled_minor_check CHECK ((VALUE >= 0));
CREATE DOMAIN withdrawal_orders_max_splits AS integer CONSTRAINT withdrawal_orders_max_splits_check CHECK (((VALUE >= 1) AND (VALUE <= 100)));
CREATE DOMAIN withdrawal_orders_merchant_reference AS text CONSTRAINT withdrawal_orders_merchant_reference_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 64)));
CREATE DOMAIN withdrawal_orders_refunded_minor AS bigint CONSTRAINT withdrawal_orders_refunded_minor_check CHECK ((VALUE >= 0));
CREATE DOMAIN withdrawal_orders_remaining_minor AS bigint CONSTRAINT withdrawal_orders_remaining_minor_check CHECK ((VALUE >= 0));
CREATE DOMAIN withdrawal_orders_reserved_minor AS bigint CONSTRAINT withdrawal_orders_reserved_minor_check CHECK ((VALUE >= 0));
CREATE DOMAIN withdrawal_orders_settled_splits AS integer CONSTRAINT withdrawal_orders_settled_splits_check CHECK ((VALUE >= 0));
CREATE DOMAIN withdrawal_orders_status AS text CONSTRAINT withdrawal_orders_status_check CHECK ((VALUE = ANY (ARRAY['pending_approval'::text, 'open'::text, 'partially_filled'::text, 'settled'::text, 'expired'::text, 'canceled'::text, 'rejected'::text])));
CREATE DOMAIN withdrawal_orders_version AS integer CONSTRAINT withdrawal_orders_version_check CHECK ((VALUE > 0));
CREATE DOMAIN withdrawal_orders_withdrawal_id AS text CONSTRAINT withdrawal_orders_withdrawal_id_check CHECK ((VALUE ~~ 'wdr\_%'::text));
CREATE DOMAIN withdrawal_policies_approval_threshold_minor AS bigint CONSTRAINT withdrawal_policies_approval_threshold_minor_check CHECK ((VALUE > 0));
CREATE DOMAIN withdrawal_policies_approval_ttl_seconds AS integer CONSTRAINT withdrawal_policies_approval_ttl_seconds_check CHECK (((VALUE >= 60) AND (VALUE <= 604800)));
CREATE DOMAIN withdrawal_policies_expires_in_seconds AS integer CONSTRAINT withdrawal_policies_expires_in_seconds_check CHECK (((VALUE >= 300) AND (VALUE <= 2592000)));
CREATE DOMAIN withdrawal_policies_max_amount_minor AS bigint CONSTRAINT withdrawal_policies_max_amount_minor_check CHECK ((VALUE <= '1000000000000'::bigint));
CREATE DOMAIN withdrawal_policies_max_splits AS integer CONSTRAINT withdrawal_policies_max_splits_check CHECK (((VALUE >= 1) AND (VALUE <= 100)));
CREATE DOMAIN withdrawal_policies_min_amount_minor AS bigint CONSTRAINT withdrawal_policies_min_amount_minor_check CHECK ((VALUE > 0));

-- The rules over several columns of a table, one function each.

CREATE FUNCTION balance_transactions_rules_hold(
  type text,
  bucket_from text,
  bucket_to text,
  available_at timestamp with time zone,
  available_after bigint,
  reverses_balance_transaction_id text,
  cleared_from_balance_transaction_id text
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce((bucket_from IS DISTINCT FROM bucket_to), true) THEN
    RAISE EXCEPTION 'new row for relation "balance_transactions" violates check constraint "balance_transactions_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'balance_transactions_check', TABLE = 'balance_transactions';
  END IF;
  IF NOT coalesce(((bucket_from IS NOT NULL) OR (bucket_to IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "balance_transactions" violates check constraint "balance_transactions_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'balance_transactions_check1', TABLE = 'balance_transactions';
  END IF;
  IF NOT coalesce(((available_after >= 0) OR (type = ANY (ARRAY['reversal'::text, 'adjustment'::text])) OR (bucket_from IS DISTINCT FROM 'available'::text)), true) THEN
    RAISE EXCEPTION 'new row for relation "balance_transactions" violates check constraint "balance_transactions_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'balance_transactions_check2', TABLE = 'balance_transactions';
  END IF;
  IF NOT coalesce(((type = 'clearing_released'::text) = (cleared_from_balance_transaction_id IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "balance_transactions" violates check constraint "balance_transactions_check3"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'balance_transactions_check3', TABLE = 'balance_transactions';
  END IF;
  IF NOT coalesce(((type <> 'reversal'::text) OR (reverses_balance_transaction_id IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "balance_transactions" violates check constraint "balance_transactions_check4"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'balance_transactions_check4', TABLE = 'balance_transactions';
  END IF;
  IF NOT coalesce((((type = 'deposit_settled'::text) = ((available_at IS NOT NULL) AND (bucket_to = 'pending_clearing'::text))) OR (type <> 'deposit_settled'::text)), true) THEN
    RAISE EXCEPTION 'new row for relation "balance_transactions" violates check constraint "balance_transactions_check5"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'balance_transactions_check5', TABLE = 'balance_transactions';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION beneficiaries_rules_hold(
  status text,
  promptpay_id_sealed text,
  promptpay_id_last4 text,
  verification_checked_at timestamp with time zone,
  verification_name_match boolean,
  verification_failure_code text,
  verified_at timestamp with time zone
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((status = 'verified'::text) = (verified_at IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "beneficiaries" violates check constraint "beneficiaries_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'beneficiaries_check', TABLE = 'beneficiaries';
  END IF;
  IF NOT coalesce(((promptpay_id_sealed IS NULL) = (promptpay_id_last4 IS NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "beneficiaries" violates check constraint "beneficiaries_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'beneficiaries_check1', TABLE = 'beneficiaries';
  END IF;
  IF NOT coalesce(((verification_checked_at IS NULL) = (verification_name_match IS NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "beneficiaries" violates check constraint "beneficiaries_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'beneficiaries_check2', TABLE = 'beneficiaries';
  END IF;
  IF NOT coalesce(((status <> 'pending_verification'::text) OR (verification_checked_at IS NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "beneficiaries" violates check constraint "beneficiaries_check3"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'beneficiaries_check3', TABLE = 'beneficiaries';
  END IF;
  IF NOT coalesce(((status <> 'verified'::text) OR (verification_name_match AND (verification_failure_code IS NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "beneficiaries" violates check constraint "beneficiaries_check4"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'beneficiaries_check4', TABLE = 'beneficiaries';
  END IF;
  IF NOT coalesce(((status <> 'rejected'::text) OR ((verification_checked_at IS NOT NULL) AND (verification_failure_code IS NOT NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "beneficiaries" violates check constraint "beneficiaries_check5"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'beneficiaries_check5', TABLE = 'beneficiaries';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION claims_rules_hold(
  cause text,
  amount_minor bigint,
  status text,
  created_at timestamp with time zone,
  opened_by text,
  opened_by_id text,
  investigated_by text,
  investigated_at timestamp with time zone,
  resolution_code text,
  resolution_note text,
  resolved_by text,
  resolved_at timestamp with time zone,
  updated_at timestamp with time zone
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((cause = 'late_slip'::text) OR (amount_minor IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_amount_known"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_amount_known', TABLE = 'claims';
  END IF;
  IF NOT coalesce((((status = ANY (ARRAY['resolved'::text, 'rejected'::text])) = (resolved_by IS NOT NULL)) AND ((resolved_by IS NULL) = (resolved_at IS NULL)) AND ((resolved_by IS NULL) = (resolution_note IS NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_decision"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_decision', TABLE = 'claims';
  END IF;
  IF NOT coalesce((((investigated_by IS NULL) = (investigated_at IS NULL)) AND ((status <> 'investigating'::text) OR (investigated_at IS NOT NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_investigation"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_investigation', TABLE = 'claims';
  END IF;
  IF NOT coalesce(((opened_by = 'backoffice'::text) = (opened_by_id IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_opened_by_id"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_opened_by_id', TABLE = 'claims';
  END IF;
  IF NOT coalesce(((status = 'resolved'::text) = (resolution_code IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_resolution_code"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_resolution_code', TABLE = 'claims';
  END IF;
  IF NOT coalesce(((updated_at >= created_at) AND ((resolved_at IS NULL) OR (resolved_at >= created_at))), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_times"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_times', TABLE = 'claims';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION clearings_rules_hold(
  available_at timestamp with time zone,
  status text,
  released_balance_transaction_id text
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((status = 'held'::text) = (available_at IS NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "clearings" violates check constraint "clearings_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'clearings_check', TABLE = 'clearings';
  END IF;
  IF NOT coalesce(((status = 'released'::text) = (released_balance_transaction_id IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "clearings" violates check constraint "clearings_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'clearings_check1', TABLE = 'clearings';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION deposit_orders_rules_hold(
  status text,
  amount_minor bigint,
  late_slip_accepted_until timestamp with time zone,
  expired_reason text,
  canceled_by text,
  cancel_reason_code text,
  transferred_amount_minor bigint,
  amount_received_minor bigint,
  fee_total_minor bigint,
  credited_amount_minor bigint,
  partial boolean,
  settled_via text,
  settled_at timestamp with time zone,
  reversal json,
  review json,
  rejection json
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce((((status = ANY (ARRAY['expired'::text, 'canceled'::text])) = ((expired_reason IS NOT NULL) OR (cancel_reason_code IS NOT NULL))) OR (status <> ALL (ARRAY['expired'::text, 'canceled'::text]))), true) THEN
    RAISE EXCEPTION 'new row for relation "deposit_orders" violates check constraint "deposit_orders_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'deposit_orders_check', TABLE = 'deposit_orders';
  END IF;
  IF NOT coalesce(((status <> 'canceled'::text) OR ((canceled_by IS NOT NULL) AND (cancel_reason_code IS NOT NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "deposit_orders" violates check constraint "deposit_orders_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'deposit_orders_check1', TABLE = 'deposit_orders';
  END IF;
  IF NOT coalesce(((status <> 'expired'::text) OR (late_slip_accepted_until IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "deposit_orders" violates check constraint "deposit_orders_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'deposit_orders_check2', TABLE = 'deposit_orders';
  END IF;
  IF NOT coalesce(((status = 'rejected'::text) = (rejection IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "deposit_orders" violates check constraint "deposit_orders_rejection"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'deposit_orders_rejection', TABLE = 'deposit_orders';
  END IF;
  IF NOT coalesce(((status = 'reversed'::text) = (reversal IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "deposit_orders" violates check constraint "deposit_orders_reversal"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'deposit_orders_reversal', TABLE = 'deposit_orders';
  END IF;
  IF NOT coalesce(((status <> 'under_review'::text) OR (review IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "deposit_orders" violates check constraint "deposit_orders_review"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'deposit_orders_review', TABLE = 'deposit_orders';
  END IF;
  IF NOT coalesce(((status <> ALL (ARRAY['settled'::text, 'reversed'::text])) OR ((transferred_amount_minor IS NOT NULL) AND (amount_received_minor IS NOT NULL) AND (fee_total_minor IS NOT NULL) AND (credited_amount_minor IS NOT NULL) AND (partial IS NOT NULL) AND (settled_via IS NOT NULL) AND (settled_at IS NOT NULL) AND (amount_received_minor > 0) AND (amount_received_minor = LEAST(transferred_amount_minor, amount_minor)) AND (fee_total_minor >= 0) AND (fee_total_minor <= amount_received_minor) AND (credited_amount_minor = (amount_received_minor - fee_total_minor)) AND (partial = (transferred_amount_minor < amount_minor)))), true) THEN
    RAISE EXCEPTION 'new row for relation "deposit_orders" violates check constraint "deposit_orders_settlement"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'deposit_orders_settlement', TABLE = 'deposit_orders';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION deposit_policies_rules_hold(
  min_amount_minor bigint,
  max_amount_minor bigint,
  default_expires_in_seconds integer,
  max_expires_in_seconds integer,
  gateway_bank_code text,
  gateway_account_sealed text,
  gateway_account_last4 text,
  gateway_account_name_th text
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce((min_amount_minor <= max_amount_minor), true) THEN
    RAISE EXCEPTION 'new row for relation "deposit_policies" violates check constraint "deposit_policies_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'deposit_policies_check', TABLE = 'deposit_policies';
  END IF;
  IF NOT coalesce((((gateway_bank_code IS NULL) = (gateway_account_sealed IS NULL)) AND ((gateway_bank_code IS NULL) = (gateway_account_last4 IS NULL)) AND ((gateway_bank_code IS NULL) = (gateway_account_name_th IS NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "deposit_policies" violates check constraint "deposit_policies_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'deposit_policies_check1', TABLE = 'deposit_policies';
  END IF;
  IF NOT coalesce((default_expires_in_seconds <= max_expires_in_seconds), true) THEN
    RAISE EXCEPTION 'new row for relation "deposit_policies" violates check constraint "deposit_policies_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'deposit_policies_check2', TABLE = 'deposit_policies';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION review_decisions_rules_hold(
  action text,
  effect text,
  note text,
  rejection_code text,
  verified_amount_minor bigint,
  amount_source text
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((action = 'reject'::text) = (rejection_code IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check', TABLE = 'review_decisions';
  END IF;
  IF NOT coalesce(((action = 'reject'::text) = (effect = 'rejected'::text)), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check1', TABLE = 'review_decisions';
  END IF;
  IF NOT coalesce(((action = 'escalate'::text) = (effect = 'escalated'::text)), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check2', TABLE = 'review_decisions';
  END IF;
  IF NOT coalesce(((action <> 'approve'::text) OR (effect = ANY (ARRAY['approval_recorded'::text, 'settled'::text]))), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check3"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check3', TABLE = 'review_decisions';
  END IF;
  IF NOT coalesce(((action = 'approve'::text) = ((verified_amount_minor IS NOT NULL) AND (amount_source IS NOT NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check4"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check4', TABLE = 'review_decisions';
  END IF;
  IF NOT coalesce(((action = 'approve'::text) OR (note IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check5"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check5', TABLE = 'review_decisions';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION slip_receipts_rules_hold(
  shape text,
  media_type text,
  size_bytes integer,
  image_sha256 text,
  blob_store text,
  wrapped_key text,
  status text,
  outcome text,
  processed_at timestamp with time zone
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((shape = 'reference'::text) = (media_type IS NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "slip_receipts" violates check constraint "slip_receipts_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'slip_receipts_check', TABLE = 'slip_receipts';
  END IF;
  IF NOT coalesce((((media_type IS NULL) = (size_bytes IS NULL)) AND ((media_type IS NULL) = (image_sha256 IS NULL)) AND ((media_type IS NULL) = (blob_store IS NULL)) AND ((media_type IS NULL) = (wrapped_key IS NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "slip_receipts" violates check constraint "slip_receipts_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'slip_receipts_check1', TABLE = 'slip_receipts';
  END IF;
  IF NOT coalesce(((status = 'processed'::text) = ((outcome IS NOT NULL) AND (processed_at IS NOT NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "slip_receipts" violates check constraint "slip_receipts_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'slip_receipts_check2', TABLE = 'slip_receipts';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION test_clocks_rules_hold(
  status text,
  advance_target timestamp with time zone,
  advance_reached_time timestamp with time zone,
  advance_job_runs integer,
  advance_slice integer,
  last_advance_requested_time timestamp with time zone,
  last_advance_outcome text,
  last_advance_job_runs integer,
  last_advance_finished_at timestamp with time zone
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((status = 'advancing'::text) = (advance_target IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "test_clocks" violates check constraint "test_clocks_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'test_clocks_check', TABLE = 'test_clocks';
  END IF;
  IF NOT coalesce(((status = 'advancing'::text) = (advance_reached_time IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "test_clocks" violates check constraint "test_clocks_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'test_clocks_check1', TABLE = 'test_clocks';
  END IF;
  IF NOT coalesce(((last_advance_requested_time IS NULL) = (last_advance_outcome IS NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "test_clocks" violates check constraint "test_clocks_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'test_clocks_check2', TABLE = 'test_clocks';
  END IF;
  IF NOT coalesce(((last_advance_outcome IS NULL) = (last_advance_finished_at IS NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "test_clocks" violates check constraint "test_clocks_check3"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'test_clocks_check3', TABLE = 'test_clocks';
  END IF;
  IF NOT coalesce(((last_advance_outcome IS NULL) = (last_advance_job_runs IS NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "test_clocks" violates check constraint "test_clocks_check4"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'test_clocks_check4', TABLE = 'test_clocks';
  END IF;
  IF NOT coalesce(((status = 'advancing'::text) OR ((advance_job_runs = 0) AND (advance_slice = 0))), true) THEN
    RAISE EXCEPTION 'new row for relation "test_clocks" violates check constraint "test_clocks_check5"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'test_clocks_check5', TABLE = 'test_clocks';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION webhook_deliveries_rules_hold(
  status text,
  failure_reason text,
  next_attempt_at timestamp with time zone,
  leased_by text,
  lease_expires_at timestamp with time zone
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((status = 'pending'::text) = (next_attempt_at IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "webhook_deliveries" violates check constraint "webhook_deliveries_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_deliveries_check', TABLE = 'webhook_deliveries';
  END IF;
  IF NOT coalesce(((status = 'failed'::text) = (failure_reason IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "webhook_deliveries" violates check constraint "webhook_deliveries_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_deliveries_check1', TABLE = 'webhook_deliveries';
  END IF;
  IF NOT coalesce(((leased_by IS NULL) = (lease_expires_at IS NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "webhook_deliveries" violates check constraint "webhook_deliveries_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_deliveries_check2', TABLE = 'webhook_deliveries';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION webhook_endpoints_rules_hold(
  status text,
  disabled_reason text,
  disabled_at timestamp with time zone,
  deleted_at timestamp with time zone
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((status = 'disabled'::text) = (disabled_reason IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "webhook_endpoints" violates check constraint "webhook_endpoints_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_endpoints_check', TABLE = 'webhook_endpoints';
  END IF;
  IF NOT coalesce(((status = 'disabled'::text) = (disabled_at IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "webhook_endpoints" violates check constraint "webhook_endpoints_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_endpoints_check1', TABLE = 'webhook_endpoints';
  END IF;
  IF NOT coalesce(((status = 'deleted'::text) = (deleted_at IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "webhook_endpoints" violates check constraint "webhook_endpoints_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_endpoints_check2', TABLE = 'webhook_endpoints';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION webhook_signing_keys_rules_hold(
  white_label_id text,
  not_before timestamp with time zone,
  not_after timestamp with time zone,
  livemode boolean
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((not_after IS NULL) OR (not_after > not_before)), true) THEN
    RAISE EXCEPTION 'new row for relation "webhook_signing_keys" violates check constraint "webhook_signing_keys_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_signing_keys_check', TABLE = 'webhook_signing_keys';
  END IF;
  IF NOT coalesce(((livemode AND (white_label_id = ''::text)) OR ((NOT livemode) AND (white_label_id <> ''::text))), true) THEN
    RAISE EXCEPTION 'new row for relation "webhook_signing_keys" violates check constraint "webhook_signing_keys_set_owner"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_signing_keys_set_owner', TABLE = 'webhook_signing_keys';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION withdrawal_disputes_rules_hold(
  kind text,
  deposit_leg_ref text,
  reason_code text,
  status text,
  clearing_held boolean,
  opened_at timestamp with time zone,
  respond_by timestamp with time zone,
  evidence_count integer,
  outcome text,
  resolved_by text,
  resolver_id text,
  resolution_note text,
  resolved_at timestamp with time zone,
  adjustment_balance_transaction_id text,
  adjustment_reversal_balance_transaction_id text
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce((respond_by > opened_at), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_disputes" violates check constraint "withdrawal_disputes_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_disputes_check', TABLE = 'withdrawal_disputes';
  END IF;
  IF NOT coalesce(((kind = 'allocation_conflict'::text) = (reason_code = 'ALLOCATION_CONFLICT'::text)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_disputes" violates check constraint "withdrawal_disputes_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_disputes_check1', TABLE = 'withdrawal_disputes';
  END IF;
  IF NOT coalesce(((kind = 'allocation_conflict'::text) = (deposit_leg_ref IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_disputes" violates check constraint "withdrawal_disputes_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_disputes_check2', TABLE = 'withdrawal_disputes';
  END IF;
  IF NOT coalesce(((kind = 'non_receipt'::text) OR (NOT clearing_held)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_disputes" violates check constraint "withdrawal_disputes_check3"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_disputes_check3', TABLE = 'withdrawal_disputes';
  END IF;
  IF NOT coalesce(((status = 'resolved'::text) = ((outcome IS NOT NULL) AND (resolved_by IS NOT NULL) AND (resolved_at IS NOT NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_disputes" violates check constraint "withdrawal_disputes_check4"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_disputes_check4', TABLE = 'withdrawal_disputes';
  END IF;
  IF NOT coalesce(((resolved_by = 'operator'::text) = ((resolver_id IS NOT NULL) AND (resolution_note IS NOT NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_disputes" violates check constraint "withdrawal_disputes_check5"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_disputes_check5', TABLE = 'withdrawal_disputes';
  END IF;
  IF NOT coalesce(((status <> 'awaiting_decision'::text) OR (evidence_count > 0)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_disputes" violates check constraint "withdrawal_disputes_check6"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_disputes_check6', TABLE = 'withdrawal_disputes';
  END IF;
  IF NOT coalesce(((adjustment_balance_transaction_id IS NULL) OR ((kind = 'allocation_conflict'::text) AND (outcome = 'depositor'::text))), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_disputes" violates check constraint "withdrawal_disputes_check7"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_disputes_check7', TABLE = 'withdrawal_disputes';
  END IF;
  IF NOT coalesce(((adjustment_reversal_balance_transaction_id IS NULL) OR (adjustment_balance_transaction_id IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_disputes" violates check constraint "withdrawal_disputes_check8"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_disputes_check8', TABLE = 'withdrawal_disputes';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION withdrawal_legs_rules_hold(
  amount_minor bigint,
  reserved_amount_minor bigint,
  status text,
  sequence integer,
  fee_recognized_minor bigint,
  settled_at timestamp with time zone,
  balance_transaction_id text,
  auto_confirm_at timestamp with time zone,
  receipt_state text
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce((reserved_amount_minor >= amount_minor), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_legs" violates check constraint "withdrawal_legs_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_legs_check', TABLE = 'withdrawal_legs';
  END IF;
  IF NOT coalesce(((status = ANY (ARRAY['filled'::text, 'reversed'::text])) = ((sequence IS NOT NULL) AND (settled_at IS NOT NULL) AND (balance_transaction_id IS NOT NULL) AND (fee_recognized_minor IS NOT NULL) AND (receipt_state IS NOT NULL) AND (auto_confirm_at IS NOT NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_legs" violates check constraint "withdrawal_legs_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_legs_check1', TABLE = 'withdrawal_legs';
  END IF;
  IF NOT coalesce(((status = 'reversed'::text) = (NOT (receipt_state IS DISTINCT FROM 'reversed'::text))), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_legs" violates check constraint "withdrawal_legs_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_legs_check2', TABLE = 'withdrawal_legs';
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION withdrawal_orders_rules_hold(
  status text,
  amount_total_minor bigint,
  fee_total_minor bigint,
  fee_recognized_minor bigint,
  filled_minor bigint,
  reserved_minor bigint,
  remaining_minor bigint,
  refunded_minor bigint,
  settled_splits integer,
  max_splits integer,
  approval_expires_at timestamp with time zone,
  closed_at timestamp with time zone,
  dispute jsonb,
  funds_on_hold boolean
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce((amount_total_minor = ((filled_minor + reserved_minor) + remaining_minor)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce((fee_recognized_minor <= fee_total_minor), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check1', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status <> 'partially_filled'::text) OR (filled_minor > 0)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check10"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check10', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce((settled_splits <= max_splits), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check2', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((amount_total_minor + fee_total_minor) <= '9007199254740991'::bigint), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check3"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check3', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status = ANY (ARRAY['settled'::text, 'expired'::text, 'canceled'::text, 'rejected'::text])) = (refunded_minor IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check4"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check4', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((refunded_minor IS NULL) OR ((reserved_minor = 0) AND (refunded_minor = remaining_minor))), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check5"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check5', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status = ANY (ARRAY['settled'::text, 'expired'::text, 'canceled'::text, 'rejected'::text])) = (closed_at IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check6"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check6', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status <> ALL (ARRAY['pending_approval'::text, 'rejected'::text])) OR ((filled_minor = 0) AND (reserved_minor = 0))), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check7"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check7', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status = 'pending_approval'::text) = (approval_expires_at IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check8"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check8', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status <> 'open'::text) OR (filled_minor = 0)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check9"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check9', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((NOT funds_on_hold) OR (dispute IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_hold_has_dispute"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_hold_has_dispute', TABLE = 'withdrawal_orders';
  END IF;
  RETURN true;
END $$;

-- Each table: its CHECKs dropped, its columns on their domains, its rules function checked.

ALTER TABLE api_keys
  DROP CONSTRAINT api_keys_api_key_id_check,
  ALTER COLUMN api_key_id TYPE api_keys_api_key_id,
  DROP CONSTRAINT api_keys_key_hash_check,
  ALTER COLUMN key_hash TYPE api_keys_key_hash,
  DROP CONSTRAINT api_keys_key_last4_check,
  ALTER COLUMN key_last4 TYPE api_keys_key_last4,
  DROP CONSTRAINT api_keys_status_check,
  ALTER COLUMN status TYPE api_keys_status;

ALTER TABLE audit_log
  DROP CONSTRAINT audit_log_audit_id_check,
  ALTER COLUMN audit_id TYPE audit_log_audit_id;

ALTER TABLE backoffice_credentials
  DROP CONSTRAINT backoffice_credentials_credential_id_check,
  ALTER COLUMN credential_id TYPE backoffice_credentials_credential_id,
  DROP CONSTRAINT backoffice_credentials_name_check,
  ALTER COLUMN name TYPE backoffice_credentials_name,
  DROP CONSTRAINT backoffice_credentials_role_check,
  ALTER COLUMN role TYPE backoffice_credentials_role,
  DROP CONSTRAINT backoffice_credentials_status_check,
  ALTER COLUMN status TYPE backoffice_credentials_status,
  DROP CONSTRAINT backoffice_credentials_token_hash_check,
  ALTER COLUMN token_hash TYPE backoffice_credentials_token_hash;

ALTER TABLE balance_transactions
  DROP CONSTRAINT balance_transactions_amount_minor_check,
  ALTER COLUMN amount_minor TYPE balance_transactions_amount_minor,
  DROP CONSTRAINT balance_transactions_balance_transaction_id_check,
  ALTER COLUMN balance_transaction_id TYPE balance_transactions_balance_transaction_id,
  DROP CONSTRAINT balance_transactions_bucket_from_check,
  ALTER COLUMN bucket_from TYPE balance_transactions_bucket_from,
  DROP CONSTRAINT balance_transactions_bucket_to_check,
  ALTER COLUMN bucket_to TYPE balance_transactions_bucket_to,
  DROP CONSTRAINT balance_transactions_currency_check,
  ALTER COLUMN currency TYPE balance_transactions_currency,
  DROP CONSTRAINT balance_transactions_direction_check,
  ALTER COLUMN direction TYPE balance_transactions_direction,
  DROP CONSTRAINT balance_transactions_pending_clearing_after_check,
  ALTER COLUMN pending_clearing_after TYPE balance_transactions_pending_clearing_after,
  DROP CONSTRAINT balance_transactions_reserved_after_check,
  ALTER COLUMN reserved_after TYPE balance_transactions_reserved_after,
  DROP CONSTRAINT balance_transactions_sequence_check,
  ALTER COLUMN sequence TYPE balance_transactions_sequence,
  DROP CONSTRAINT balance_transactions_type_check,
  ALTER COLUMN type TYPE balance_transactions_type,
  DROP CONSTRAINT balance_transactions_check,
  DROP CONSTRAINT balance_transactions_check1,
  DROP CONSTRAINT balance_transactions_check2,
  DROP CONSTRAINT balance_transactions_check3,
  DROP CONSTRAINT balance_transactions_check4,
  DROP CONSTRAINT balance_transactions_check5,
  ADD CONSTRAINT balance_transactions_rules CHECK (balance_transactions_rules_hold(type, bucket_from, bucket_to, available_at, available_after, reverses_balance_transaction_id, cleared_from_balance_transaction_id));

ALTER TABLE banks
  DROP CONSTRAINT banks_bank_code_check,
  ALTER COLUMN bank_code TYPE banks_bank_code,
  DROP CONSTRAINT banks_sides_check,
  ALTER COLUMN sides TYPE banks_sides;

ALTER TABLE beneficiaries
  DROP CONSTRAINT beneficiaries_account_name_en_check,
  ALTER COLUMN account_name_en TYPE beneficiaries_account_name_en,
  DROP CONSTRAINT beneficiaries_account_name_th_check,
  ALTER COLUMN account_name_th TYPE beneficiaries_account_name_th,
  DROP CONSTRAINT beneficiaries_account_number_hmac_check,
  ALTER COLUMN account_number_hmac TYPE beneficiaries_account_number_hmac,
  DROP CONSTRAINT beneficiaries_account_number_last4_check,
  ALTER COLUMN account_number_last4 TYPE beneficiaries_account_number_last4,
  DROP CONSTRAINT beneficiaries_beneficiary_id_check,
  ALTER COLUMN beneficiary_id TYPE beneficiaries_beneficiary_id,
  DROP CONSTRAINT beneficiaries_end_user_ref_check,
  ALTER COLUMN end_user_ref TYPE beneficiaries_end_user_ref,
  DROP CONSTRAINT beneficiaries_promptpay_id_last4_check,
  ALTER COLUMN promptpay_id_last4 TYPE beneficiaries_promptpay_id_last4,
  DROP CONSTRAINT beneficiaries_status_check,
  ALTER COLUMN status TYPE beneficiaries_status,
  DROP CONSTRAINT beneficiaries_verification_failure_code_check,
  ALTER COLUMN verification_failure_code TYPE beneficiaries_verification_failure_code,
  DROP CONSTRAINT beneficiaries_version_check,
  ALTER COLUMN version TYPE beneficiaries_version,
  DROP CONSTRAINT beneficiaries_check,
  DROP CONSTRAINT beneficiaries_check1,
  DROP CONSTRAINT beneficiaries_check2,
  DROP CONSTRAINT beneficiaries_check3,
  DROP CONSTRAINT beneficiaries_check4,
  DROP CONSTRAINT beneficiaries_check5,
  ADD CONSTRAINT beneficiaries_rules CHECK (beneficiaries_rules_hold(status, promptpay_id_sealed, promptpay_id_last4, verification_checked_at, verification_name_match, verification_failure_code, verified_at));

ALTER TABLE brands
  DROP CONSTRAINT brands_checkout_base_url_check,
  ALTER COLUMN checkout_base_url TYPE brands_checkout_base_url,
  DROP CONSTRAINT brands_name_check,
  ALTER COLUMN name TYPE brands_name,
  DROP CONSTRAINT brands_status_check,
  ALTER COLUMN status TYPE brands_status,
  DROP CONSTRAINT brands_white_label_id_check,
  ALTER COLUMN white_label_id TYPE brands_white_label_id;

ALTER TABLE claims
  DROP CONSTRAINT claims_amount_minor_check,
  ALTER COLUMN amount_minor TYPE claims_amount_minor,
  DROP CONSTRAINT claims_cause_check,
  ALTER COLUMN cause TYPE claims_cause,
  DROP CONSTRAINT claims_claim_id_check,
  ALTER COLUMN claim_id TYPE claims_claim_id,
  DROP CONSTRAINT claims_opened_by_check,
  ALTER COLUMN opened_by TYPE claims_opened_by,
  DROP CONSTRAINT claims_resolution_code_check,
  ALTER COLUMN resolution_code TYPE claims_resolution_code,
  DROP CONSTRAINT claims_resolution_note_check,
  ALTER COLUMN resolution_note TYPE claims_resolution_note,
  DROP CONSTRAINT claims_status_check,
  ALTER COLUMN status TYPE claims_status,
  DROP CONSTRAINT claims_version_check,
  ALTER COLUMN version TYPE claims_version,
  DROP CONSTRAINT claims_amount_known,
  DROP CONSTRAINT claims_decision,
  DROP CONSTRAINT claims_investigation,
  DROP CONSTRAINT claims_opened_by_id,
  DROP CONSTRAINT claims_resolution_code,
  DROP CONSTRAINT claims_times,
  ADD CONSTRAINT claims_rules CHECK (claims_rules_hold(cause, amount_minor, status, created_at, opened_by, opened_by_id, investigated_by, investigated_at, resolution_code, resolution_note, resolved_by, resolved_at, updated_at));

ALTER TABLE clearings
  DROP CONSTRAINT clearings_amount_minor_check,
  ALTER COLUMN amount_minor TYPE clearings_amount_minor,
  DROP CONSTRAINT clearings_status_check,
  ALTER COLUMN status TYPE clearings_status,
  DROP CONSTRAINT clearings_check,
  DROP CONSTRAINT clearings_check1,
  ADD CONSTRAINT clearings_rules CHECK (clearings_rules_hold(available_at, status, released_balance_transaction_id));

ALTER TABLE deposit_evidence
  DROP CONSTRAINT deposit_evidence_evidence_id_check,
  ALTER COLUMN evidence_id TYPE deposit_evidence_evidence_id,
  DROP CONSTRAINT deposit_evidence_kind_check,
  ALTER COLUMN kind TYPE deposit_evidence_kind,
  DROP CONSTRAINT deposit_evidence_note_check,
  ALTER COLUMN note TYPE deposit_evidence_note,
  DROP CONSTRAINT deposit_evidence_reference_check,
  ALTER COLUMN reference TYPE deposit_evidence_reference;

ALTER TABLE deposit_legs
  DROP CONSTRAINT deposit_legs_amount_minor_check,
  ALTER COLUMN amount_minor TYPE deposit_legs_amount_minor,
  DROP CONSTRAINT deposit_legs_destination_check,
  ALTER COLUMN destination TYPE deposit_legs_destination,
  DROP CONSTRAINT deposit_legs_leg_ref_check,
  ALTER COLUMN leg_ref TYPE deposit_legs_leg_ref,
  DROP CONSTRAINT deposit_legs_paid_minor_check,
  ALTER COLUMN paid_minor TYPE deposit_legs_paid_minor,
  DROP CONSTRAINT deposit_legs_sequence_check,
  ALTER COLUMN sequence TYPE deposit_legs_sequence,
  DROP CONSTRAINT deposit_legs_status_check,
  ALTER COLUMN status TYPE deposit_legs_status;

ALTER TABLE deposit_orders
  DROP CONSTRAINT deposit_orders_amount_minor_check,
  ALTER COLUMN amount_minor TYPE deposit_orders_amount_minor,
  DROP CONSTRAINT deposit_orders_canceled_by_check,
  ALTER COLUMN canceled_by TYPE deposit_orders_canceled_by,
  DROP CONSTRAINT deposit_orders_deposit_id_check,
  ALTER COLUMN deposit_id TYPE deposit_orders_deposit_id,
  DROP CONSTRAINT deposit_orders_end_user_ref_check,
  ALTER COLUMN end_user_ref TYPE deposit_orders_end_user_ref,
  DROP CONSTRAINT deposit_orders_expires_in_seconds_check,
  ALTER COLUMN expires_in_seconds TYPE deposit_orders_expires_in_seconds,
  DROP CONSTRAINT deposit_orders_fill_preference_check,
  ALTER COLUMN fill_preference TYPE deposit_orders_fill_preference,
  DROP CONSTRAINT deposit_orders_liquidity_source_check,
  ALTER COLUMN liquidity_source TYPE deposit_orders_liquidity_source,
  DROP CONSTRAINT deposit_orders_merchant_reference_check,
  ALTER COLUMN merchant_reference TYPE deposit_orders_merchant_reference,
  DROP CONSTRAINT deposit_orders_min_ttl_seconds_check,
  ALTER COLUMN min_ttl_seconds TYPE deposit_orders_min_ttl_seconds,
  DROP CONSTRAINT deposit_orders_sender_bank_code_check,
  ALTER COLUMN sender_bank_code TYPE deposit_orders_sender_bank_code,
  DROP CONSTRAINT deposit_orders_settled_via_check,
  ALTER COLUMN settled_via TYPE deposit_orders_settled_via,
  DROP CONSTRAINT deposit_orders_slip_attempts_check,
  ALTER COLUMN slip_attempts TYPE deposit_orders_slip_attempts,
  DROP CONSTRAINT deposit_orders_status_check,
  ALTER COLUMN status TYPE deposit_orders_status,
  DROP CONSTRAINT deposit_orders_version_check,
  ALTER COLUMN version TYPE deposit_orders_version,
  DROP CONSTRAINT deposit_orders_check,
  DROP CONSTRAINT deposit_orders_check1,
  DROP CONSTRAINT deposit_orders_check2,
  DROP CONSTRAINT deposit_orders_rejection,
  DROP CONSTRAINT deposit_orders_reversal,
  DROP CONSTRAINT deposit_orders_review,
  DROP CONSTRAINT deposit_orders_settlement,
  ADD CONSTRAINT deposit_orders_rules CHECK (deposit_orders_rules_hold(status, amount_minor, late_slip_accepted_until, expired_reason, canceled_by, cancel_reason_code, transferred_amount_minor, amount_received_minor, fee_total_minor, credited_amount_minor, partial, settled_via, settled_at, reversal, review, rejection));

ALTER TABLE deposit_policies
  DROP CONSTRAINT deposit_policies_default_expires_in_seconds_check,
  ALTER COLUMN default_expires_in_seconds TYPE deposit_policies_default_expires_in_seconds,
  DROP CONSTRAINT deposit_policies_four_eyes_min_amount_minor_check,
  ALTER COLUMN four_eyes_min_amount_minor TYPE deposit_policies_four_eyes_min_amount_minor,
  DROP CONSTRAINT deposit_policies_gateway_bank_code_check,
  ALTER COLUMN gateway_bank_code TYPE deposit_policies_gateway_bank_code,
  DROP CONSTRAINT deposit_policies_liquidity_wait_seconds_check,
  ALTER COLUMN liquidity_wait_seconds TYPE deposit_policies_liquidity_wait_seconds,
  DROP CONSTRAINT deposit_policies_max_amount_minor_check,
  ALTER COLUMN max_amount_minor TYPE deposit_policies_max_amount_minor,
  DROP CONSTRAINT deposit_policies_max_expires_in_seconds_check,
  ALTER COLUMN max_expires_in_seconds TYPE deposit_policies_max_expires_in_seconds,
  DROP CONSTRAINT deposit_policies_max_legs_check,
  ALTER COLUMN max_legs TYPE deposit_policies_max_legs,
  DROP CONSTRAINT deposit_policies_min_amount_minor_check,
  ALTER COLUMN min_amount_minor TYPE deposit_policies_min_amount_minor,
  DROP CONSTRAINT deposit_policies_check,
  DROP CONSTRAINT deposit_policies_check1,
  DROP CONSTRAINT deposit_policies_check2,
  ADD CONSTRAINT deposit_policies_rules CHECK (deposit_policies_rules_hold(min_amount_minor, max_amount_minor, default_expires_in_seconds, max_expires_in_seconds, gateway_bank_code, gateway_account_sealed, gateway_account_last4, gateway_account_name_th));

ALTER TABLE event_sequences
  DROP CONSTRAINT event_sequences_last_sequence_check,
  ALTER COLUMN last_sequence TYPE event_sequences_last_sequence;

ALTER TABLE events
  DROP CONSTRAINT events_event_id_check,
  ALTER COLUMN event_id TYPE events_event_id,
  DROP CONSTRAINT events_sequence_check,
  ALTER COLUMN sequence TYPE events_sequence;

ALTER TABLE fee_schedules
  DROP CONSTRAINT fee_schedules_channel_check,
  ALTER COLUMN channel TYPE fee_schedules_channel,
  DROP CONSTRAINT fee_schedules_fixed_fee_minor_check,
  ALTER COLUMN fixed_fee_minor TYPE fee_schedules_fixed_fee_minor,
  DROP CONSTRAINT fee_schedules_merchant_id_check,
  ALTER COLUMN merchant_id TYPE fee_schedules_merchant_id,
  DROP CONSTRAINT fee_schedules_processing_fee_bps_check,
  ALTER COLUMN processing_fee_bps TYPE fee_schedules_processing_fee_bps,
  DROP CONSTRAINT fee_schedules_vat_bps_check,
  ALTER COLUMN vat_bps TYPE fee_schedules_vat_bps;

ALTER TABLE force_complete_requests
  DROP CONSTRAINT force_complete_requests_claimed_verified_amount_minor_check,
  ALTER COLUMN claimed_verified_amount_minor TYPE force_complete_requests_claimed_verified_amount_minor,
  DROP CONSTRAINT force_complete_requests_derived_verified_amount_minor_check,
  ALTER COLUMN derived_verified_amount_minor TYPE force_complete_requests_derived_verified_amount_minor,
  DROP CONSTRAINT force_complete_requests_note_check,
  ALTER COLUMN note TYPE force_complete_requests_note;

ALTER TABLE idempotency_records
  DROP CONSTRAINT idempotency_records_idempotency_key_check,
  ALTER COLUMN idempotency_key TYPE idempotency_records_idempotency_key,
  DROP CONSTRAINT idempotency_records_request_fingerprint_check,
  ALTER COLUMN request_fingerprint TYPE idempotency_records_request_fingerprint,
  DROP CONSTRAINT idempotency_records_response_status_check,
  ALTER COLUMN response_status TYPE idempotency_records_response_status;

ALTER TABLE jobs
  DROP CONSTRAINT jobs_attempts_check,
  ALTER COLUMN attempts TYPE jobs_attempts,
  DROP CONSTRAINT jobs_job_id_check,
  ALTER COLUMN job_id TYPE jobs_job_id,
  DROP CONSTRAINT jobs_max_attempts_check,
  ALTER COLUMN max_attempts TYPE jobs_max_attempts,
  DROP CONSTRAINT jobs_status_check,
  ALTER COLUMN status TYPE jobs_status;

ALTER TABLE merchants
  DROP CONSTRAINT merchants_merchant_id_check,
  ALTER COLUMN merchant_id TYPE merchants_merchant_id,
  DROP CONSTRAINT merchants_name_check,
  ALTER COLUMN name TYPE merchants_name,
  DROP CONSTRAINT merchants_status_check,
  ALTER COLUMN status TYPE merchants_status;

ALTER TABLE rate_limit_counters
  DROP CONSTRAINT rate_limit_counters_request_count_check,
  ALTER COLUMN request_count TYPE rate_limit_counters_request_count;

ALTER TABLE request_nonces
  DROP CONSTRAINT request_nonces_nonce_check,
  ALTER COLUMN nonce TYPE request_nonces_nonce;

ALTER TABLE review_decisions
  DROP CONSTRAINT review_decisions_action_check,
  ALTER COLUMN action TYPE review_decisions_action,
  DROP CONSTRAINT review_decisions_amount_source_check,
  ALTER COLUMN amount_source TYPE review_decisions_amount_source,
  DROP CONSTRAINT review_decisions_decision_id_check,
  ALTER COLUMN decision_id TYPE review_decisions_decision_id,
  DROP CONSTRAINT review_decisions_deposit_version_check,
  ALTER COLUMN deposit_version TYPE review_decisions_deposit_version,
  DROP CONSTRAINT review_decisions_effect_check,
  ALTER COLUMN effect TYPE review_decisions_effect,
  DROP CONSTRAINT review_decisions_idempotency_key_check,
  ALTER COLUMN idempotency_key TYPE review_decisions_idempotency_key,
  DROP CONSTRAINT review_decisions_note_check,
  ALTER COLUMN note TYPE review_decisions_note,
  DROP CONSTRAINT review_decisions_verified_amount_minor_check,
  ALTER COLUMN verified_amount_minor TYPE review_decisions_verified_amount_minor,
  DROP CONSTRAINT review_decisions_check,
  DROP CONSTRAINT review_decisions_check1,
  DROP CONSTRAINT review_decisions_check2,
  DROP CONSTRAINT review_decisions_check3,
  DROP CONSTRAINT review_decisions_check4,
  DROP CONSTRAINT review_decisions_check5,
  ADD CONSTRAINT review_decisions_rules CHECK (review_decisions_rules_hold(action, effect, note, rejection_code, verified_amount_minor, amount_source));

ALTER TABLE sandbox_bank_accounts
  DROP CONSTRAINT sandbox_bank_accounts_account_number_check,
  ALTER COLUMN account_number TYPE sandbox_bank_accounts_account_number,
  DROP CONSTRAINT sandbox_bank_accounts_account_type_check,
  ALTER COLUMN account_type TYPE sandbox_bank_accounts_account_type,
  DROP CONSTRAINT sandbox_bank_accounts_holder_name_en_check,
  ALTER COLUMN holder_name_en TYPE sandbox_bank_accounts_holder_name_en,
  DROP CONSTRAINT sandbox_bank_accounts_holder_name_th_check,
  ALTER COLUMN holder_name_th TYPE sandbox_bank_accounts_holder_name_th,
  DROP CONSTRAINT sandbox_bank_accounts_status_check,
  ALTER COLUMN status TYPE sandbox_bank_accounts_status;

ALTER TABLE sandbox_bank_transfers
  DROP CONSTRAINT sandbox_bank_transfers_amount_minor_check,
  ALTER COLUMN amount_minor TYPE sandbox_bank_transfers_amount_minor,
  DROP CONSTRAINT sandbox_bank_transfers_receiver_account_number_check,
  ALTER COLUMN receiver_account_number TYPE sandbox_bank_transfers_receiver_account_number,
  DROP CONSTRAINT sandbox_bank_transfers_receiver_name_th_check,
  ALTER COLUMN receiver_name_th TYPE sandbox_bank_transfers_receiver_name_th,
  DROP CONSTRAINT sandbox_bank_transfers_sender_account_number_check,
  ALTER COLUMN sender_account_number TYPE sandbox_bank_transfers_sender_account_number,
  DROP CONSTRAINT sandbox_bank_transfers_sender_name_en_check,
  ALTER COLUMN sender_name_en TYPE sandbox_bank_transfers_sender_name_en,
  DROP CONSTRAINT sandbox_bank_transfers_sender_name_th_check,
  ALTER COLUMN sender_name_th TYPE sandbox_bank_transfers_sender_name_th,
  DROP CONSTRAINT sandbox_bank_transfers_trans_ref_check,
  ALTER COLUMN trans_ref TYPE sandbox_bank_transfers_trans_ref;

ALTER TABLE senders
  DROP CONSTRAINT senders_sender_id_check,
  ALTER COLUMN sender_id TYPE senders_sender_id;

ALTER TABLE slip_receipts
  DROP CONSTRAINT slip_receipts_blob_store_check,
  ALTER COLUMN blob_store TYPE slip_receipts_blob_store,
  DROP CONSTRAINT slip_receipts_fingerprint_check,
  ALTER COLUMN fingerprint TYPE slip_receipts_fingerprint,
  DROP CONSTRAINT slip_receipts_idempotency_key_check,
  ALTER COLUMN idempotency_key TYPE slip_receipts_idempotency_key,
  DROP CONSTRAINT slip_receipts_image_sha256_check,
  ALTER COLUMN image_sha256 TYPE slip_receipts_image_sha256,
  DROP CONSTRAINT slip_receipts_media_type_check,
  ALTER COLUMN media_type TYPE slip_receipts_media_type,
  DROP CONSTRAINT slip_receipts_receipt_id_check,
  ALTER COLUMN receipt_id TYPE slip_receipts_receipt_id,
  DROP CONSTRAINT slip_receipts_shape_check,
  ALTER COLUMN shape TYPE slip_receipts_shape,
  DROP CONSTRAINT slip_receipts_size_bytes_check,
  ALTER COLUMN size_bytes TYPE slip_receipts_size_bytes,
  DROP CONSTRAINT slip_receipts_status_check,
  ALTER COLUMN status TYPE slip_receipts_status,
  DROP CONSTRAINT slip_receipts_check,
  DROP CONSTRAINT slip_receipts_check1,
  DROP CONSTRAINT slip_receipts_check2,
  ADD CONSTRAINT slip_receipts_rules CHECK (slip_receipts_rules_hold(shape, media_type, size_bytes, image_sha256, blob_store, wrapped_key, status, outcome, processed_at));

ALTER TABLE slip_transfers
  DROP CONSTRAINT slip_transfers_amount_minor_check,
  ALTER COLUMN amount_minor TYPE slip_transfers_amount_minor,
  DROP CONSTRAINT slip_transfers_sending_bank_code_check,
  ALTER COLUMN sending_bank_code TYPE slip_transfers_sending_bank_code,
  DROP CONSTRAINT slip_transfers_trans_ref_check,
  ALTER COLUMN trans_ref TYPE slip_transfers_trans_ref;

ALTER TABLE test_clocks
  DROP CONSTRAINT test_clocks_advance_job_runs_check,
  ALTER COLUMN advance_job_runs TYPE test_clocks_advance_job_runs,
  DROP CONSTRAINT test_clocks_advance_slice_check,
  ALTER COLUMN advance_slice TYPE test_clocks_advance_slice,
  DROP CONSTRAINT test_clocks_last_advance_job_runs_check,
  ALTER COLUMN last_advance_job_runs TYPE test_clocks_last_advance_job_runs,
  DROP CONSTRAINT test_clocks_last_advance_outcome_check,
  ALTER COLUMN last_advance_outcome TYPE test_clocks_last_advance_outcome,
  DROP CONSTRAINT test_clocks_livemode_check,
  ALTER COLUMN livemode TYPE test_clocks_livemode,
  DROP CONSTRAINT test_clocks_name_check,
  ALTER COLUMN name TYPE test_clocks_name,
  DROP CONSTRAINT test_clocks_status_check,
  ALTER COLUMN status TYPE test_clocks_status,
  DROP CONSTRAINT test_clocks_test_clock_id_check,
  ALTER COLUMN test_clock_id TYPE test_clocks_test_clock_id,
  DROP CONSTRAINT test_clocks_version_check,
  ALTER COLUMN version TYPE test_clocks_version,
  DROP CONSTRAINT test_clocks_check,
  DROP CONSTRAINT test_clocks_check1,
  DROP CONSTRAINT test_clocks_check2,
  DROP CONSTRAINT test_clocks_check3,
  DROP CONSTRAINT test_clocks_check4,
  DROP CONSTRAINT test_clocks_check5,
  ADD CONSTRAINT test_clocks_rules CHECK (test_clocks_rules_hold(status, advance_target, advance_reached_time, advance_job_runs, advance_slice, last_advance_requested_time, last_advance_outcome, last_advance_job_runs, last_advance_finished_at));

ALTER TABLE wallets
  DROP CONSTRAINT wallets_last_sequence_check,
  ALTER COLUMN last_sequence TYPE wallets_last_sequence,
  DROP CONSTRAINT wallets_pending_clearing_minor_check,
  ALTER COLUMN pending_clearing_minor TYPE wallets_pending_clearing_minor,
  DROP CONSTRAINT wallets_reserved_minor_check,
  ALTER COLUMN reserved_minor TYPE wallets_reserved_minor;

ALTER TABLE webhook_deliveries
  DROP CONSTRAINT webhook_deliveries_attempt_count_check,
  ALTER COLUMN attempt_count TYPE webhook_deliveries_attempt_count,
  DROP CONSTRAINT webhook_deliveries_delivery_id_check,
  ALTER COLUMN delivery_id TYPE webhook_deliveries_delivery_id,
  DROP CONSTRAINT webhook_deliveries_failure_reason_check,
  ALTER COLUMN failure_reason TYPE webhook_deliveries_failure_reason,
  DROP CONSTRAINT webhook_deliveries_round_attempts_check,
  ALTER COLUMN round_attempts TYPE webhook_deliveries_round_attempts,
  DROP CONSTRAINT webhook_deliveries_round_check,
  ALTER COLUMN round TYPE webhook_deliveries_round,
  DROP CONSTRAINT webhook_deliveries_status_check,
  ALTER COLUMN status TYPE webhook_deliveries_status,
  DROP CONSTRAINT webhook_deliveries_check,
  DROP CONSTRAINT webhook_deliveries_check1,
  DROP CONSTRAINT webhook_deliveries_check2,
  ADD CONSTRAINT webhook_deliveries_rules CHECK (webhook_deliveries_rules_hold(status, failure_reason, next_attempt_at, leased_by, lease_expires_at));

ALTER TABLE webhook_delivery_attempts
  DROP CONSTRAINT webhook_delivery_attempts_attempt_check,
  ALTER COLUMN attempt TYPE webhook_delivery_attempts_attempt,
  DROP CONSTRAINT webhook_delivery_attempts_attempt_sequence_check,
  ALTER COLUMN attempt_sequence TYPE webhook_delivery_attempts_attempt_sequence,
  DROP CONSTRAINT webhook_delivery_attempts_duration_ms_check,
  ALTER COLUMN duration_ms TYPE webhook_delivery_attempts_duration_ms,
  DROP CONSTRAINT webhook_delivery_attempts_round_check,
  ALTER COLUMN round TYPE webhook_delivery_attempts_round,
  DROP CONSTRAINT webhook_delivery_attempts_status_check,
  ALTER COLUMN status TYPE webhook_delivery_attempts_status;

ALTER TABLE webhook_endpoints
  DROP CONSTRAINT webhook_endpoints_description_check,
  ALTER COLUMN description TYPE webhook_endpoints_description,
  DROP CONSTRAINT webhook_endpoints_disabled_reason_check,
  ALTER COLUMN disabled_reason TYPE webhook_endpoints_disabled_reason,
  DROP CONSTRAINT webhook_endpoints_endpoint_id_check,
  ALTER COLUMN endpoint_id TYPE webhook_endpoints_endpoint_id,
  DROP CONSTRAINT webhook_endpoints_status_check,
  ALTER COLUMN status TYPE webhook_endpoints_status,
  DROP CONSTRAINT webhook_endpoints_url_check,
  ALTER COLUMN url TYPE webhook_endpoints_url,
  DROP CONSTRAINT webhook_endpoints_version_check,
  ALTER COLUMN version TYPE webhook_endpoints_version,
  DROP CONSTRAINT webhook_endpoints_check,
  DROP CONSTRAINT webhook_endpoints_check1,
  DROP CONSTRAINT webhook_endpoints_check2,
  ADD CONSTRAINT webhook_endpoints_rules CHECK (webhook_endpoints_rules_hold(status, disabled_reason, disabled_at, deleted_at));

ALTER TABLE webhook_feed_cursors
  DROP CONSTRAINT webhook_feed_cursors_last_sequence_check,
  ALTER COLUMN last_sequence TYPE webhook_feed_cursors_last_sequence;

ALTER TABLE webhook_key_announcements
  DROP CONSTRAINT webhook_key_announcements_event_id_check,
  ALTER COLUMN event_id TYPE webhook_key_announcements_event_id,
  DROP CONSTRAINT webhook_key_announcements_kid_check,
  ALTER COLUMN kid TYPE webhook_key_announcements_kid;

ALTER TABLE webhook_sandbox_key_rotation_runs
  DROP CONSTRAINT webhook_sandbox_key_rotation_runs_scenario_run_id_check,
  ALTER COLUMN scenario_run_id TYPE webhook_sandbox_key_rotation_runs_scenario_run_id;

ALTER TABLE webhook_signing_keys
  DROP CONSTRAINT webhook_signing_keys_alg_check,
  ALTER COLUMN alg TYPE webhook_signing_keys_alg,
  DROP CONSTRAINT webhook_signing_keys_generation_check,
  ALTER COLUMN generation TYPE webhook_signing_keys_generation,
  DROP CONSTRAINT webhook_signing_keys_kid_check,
  ALTER COLUMN kid TYPE webhook_signing_keys_kid,
  DROP CONSTRAINT webhook_signing_keys_check,
  DROP CONSTRAINT webhook_signing_keys_set_owner,
  ADD CONSTRAINT webhook_signing_keys_rules CHECK (webhook_signing_keys_rules_hold(white_label_id, not_before, not_after, livemode));

ALTER TABLE withdrawal_dispute_evidence
  DROP CONSTRAINT withdrawal_dispute_evidence_evidence_id_check,
  ALTER COLUMN evidence_id TYPE withdrawal_dispute_evidence_evidence_id,
  DROP CONSTRAINT withdrawal_dispute_evidence_kind_check,
  ALTER COLUMN kind TYPE withdrawal_dispute_evidence_kind,
  DROP CONSTRAINT withdrawal_dispute_evidence_note_check,
  ALTER COLUMN note TYPE withdrawal_dispute_evidence_note,
  DROP CONSTRAINT withdrawal_dispute_evidence_reference_check,
  ALTER COLUMN reference TYPE withdrawal_dispute_evidence_reference;

ALTER TABLE withdrawal_disputes
  DROP CONSTRAINT withdrawal_disputes_amount_minor_check,
  ALTER COLUMN amount_minor TYPE withdrawal_disputes_amount_minor,
  DROP CONSTRAINT withdrawal_disputes_deposit_leg_ref_check,
  ALTER COLUMN deposit_leg_ref TYPE withdrawal_disputes_deposit_leg_ref,
  DROP CONSTRAINT withdrawal_disputes_dispute_id_check,
  ALTER COLUMN dispute_id TYPE withdrawal_disputes_dispute_id,
  DROP CONSTRAINT withdrawal_disputes_evidence_count_check,
  ALTER COLUMN evidence_count TYPE withdrawal_disputes_evidence_count,
  DROP CONSTRAINT withdrawal_disputes_kind_check,
  ALTER COLUMN kind TYPE withdrawal_disputes_kind,
  DROP CONSTRAINT withdrawal_disputes_leg_ref_check,
  ALTER COLUMN leg_ref TYPE withdrawal_disputes_leg_ref,
  DROP CONSTRAINT withdrawal_disputes_note_check,
  ALTER COLUMN note TYPE withdrawal_disputes_note,
  DROP CONSTRAINT withdrawal_disputes_outcome_check,
  ALTER COLUMN outcome TYPE withdrawal_disputes_outcome,
  DROP CONSTRAINT withdrawal_disputes_reason_code_check,
  ALTER COLUMN reason_code TYPE withdrawal_disputes_reason_code,
  DROP CONSTRAINT withdrawal_disputes_resolution_note_check,
  ALTER COLUMN resolution_note TYPE withdrawal_disputes_resolution_note,
  DROP CONSTRAINT withdrawal_disputes_resolved_by_check,
  ALTER COLUMN resolved_by TYPE withdrawal_disputes_resolved_by,
  DROP CONSTRAINT withdrawal_disputes_status_check,
  ALTER COLUMN status TYPE withdrawal_disputes_status,
  DROP CONSTRAINT withdrawal_disputes_check,
  DROP CONSTRAINT withdrawal_disputes_check1,
  DROP CONSTRAINT withdrawal_disputes_check2,
  DROP CONSTRAINT withdrawal_disputes_check3,
  DROP CONSTRAINT withdrawal_disputes_check4,
  DROP CONSTRAINT withdrawal_disputes_check5,
  DROP CONSTRAINT withdrawal_disputes_check6,
  DROP CONSTRAINT withdrawal_disputes_check7,
  DROP CONSTRAINT withdrawal_disputes_check8,
  ADD CONSTRAINT withdrawal_disputes_rules CHECK (withdrawal_disputes_rules_hold(kind, deposit_leg_ref, reason_code, status, clearing_held, opened_at, respond_by, evidence_count, outcome, resolved_by, resolver_id, resolution_note, resolved_at, adjustment_balance_transaction_id, adjustment_reversal_balance_transaction_id));

ALTER TABLE withdrawal_legs
  DROP CONSTRAINT withdrawal_legs_amount_minor_check,
  ALTER COLUMN amount_minor TYPE withdrawal_legs_amount_minor,
  DROP CONSTRAINT withdrawal_legs_fee_recognized_minor_check,
  ALTER COLUMN fee_recognized_minor TYPE withdrawal_legs_fee_recognized_minor,
  DROP CONSTRAINT withdrawal_legs_leg_ref_check,
  ALTER COLUMN leg_ref TYPE withdrawal_legs_leg_ref,
  DROP CONSTRAINT withdrawal_legs_receipt_state_check,
  ALTER COLUMN receipt_state TYPE withdrawal_legs_receipt_state,
  DROP CONSTRAINT withdrawal_legs_sequence_check,
  ALTER COLUMN sequence TYPE withdrawal_legs_sequence,
  DROP CONSTRAINT withdrawal_legs_status_check,
  ALTER COLUMN status TYPE withdrawal_legs_status,
  DROP CONSTRAINT withdrawal_legs_check,
  DROP CONSTRAINT withdrawal_legs_check1,
  DROP CONSTRAINT withdrawal_legs_check2,
  ADD CONSTRAINT withdrawal_legs_rules CHECK (withdrawal_legs_rules_hold(amount_minor, reserved_amount_minor, status, sequence, fee_recognized_minor, settled_at, balance_transaction_id, auto_confirm_at, receipt_state));

ALTER TABLE withdrawal_orders
  DROP CONSTRAINT withdrawal_orders_amount_total_minor_check,
  ALTER COLUMN amount_total_minor TYPE withdrawal_orders_amount_total_minor,
  DROP CONSTRAINT withdrawal_orders_closed_by_check,
  ALTER COLUMN closed_by TYPE withdrawal_orders_closed_by,
  DROP CONSTRAINT withdrawal_orders_end_user_ref_check,
  ALTER COLUMN end_user_ref TYPE withdrawal_orders_end_user_ref,
  DROP CONSTRAINT withdrawal_orders_fee_recognized_minor_check,
  ALTER COLUMN fee_recognized_minor TYPE withdrawal_orders_fee_recognized_minor,
  DROP CONSTRAINT withdrawal_orders_fee_total_minor_check,
  ALTER COLUMN fee_total_minor TYPE withdrawal_orders_fee_total_minor,
  DROP CONSTRAINT withdrawal_orders_filled_minor_check,
  ALTER COLUMN filled_minor TYPE withdrawal_orders_filled_minor,
  DROP CONSTRAINT withdrawal_orders_max_splits_check,
  ALTER COLUMN max_splits TYPE withdrawal_orders_max_splits,
  DROP CONSTRAINT withdrawal_orders_merchant_reference_check,
  ALTER COLUMN merchant_reference TYPE withdrawal_orders_merchant_reference,
  DROP CONSTRAINT withdrawal_orders_refunded_minor_check,
  ALTER COLUMN refunded_minor TYPE withdrawal_orders_refunded_minor,
  DROP CONSTRAINT withdrawal_orders_remaining_minor_check,
  ALTER COLUMN remaining_minor TYPE withdrawal_orders_remaining_minor,
  DROP CONSTRAINT withdrawal_orders_reserved_minor_check,
  ALTER COLUMN reserved_minor TYPE withdrawal_orders_reserved_minor,
  DROP CONSTRAINT withdrawal_orders_settled_splits_check,
  ALTER COLUMN settled_splits TYPE withdrawal_orders_settled_splits,
  DROP CONSTRAINT withdrawal_orders_status_check,
  ALTER COLUMN status TYPE withdrawal_orders_status,
  DROP CONSTRAINT withdrawal_orders_version_check,
  ALTER COLUMN version TYPE withdrawal_orders_version,
  DROP CONSTRAINT withdrawal_orders_withdrawal_id_check,
  ALTER COLUMN withdrawal_id TYPE withdrawal_orders_withdrawal_id,
  DROP CONSTRAINT withdrawal_orders_check,
  DROP CONSTRAINT withdrawal_orders_check1,
  DROP CONSTRAINT withdrawal_orders_check10,
  DROP CONSTRAINT withdrawal_orders_check2,
  DROP CONSTRAINT withdrawal_orders_check3,
  DROP CONSTRAINT withdrawal_orders_check4,
  DROP CONSTRAINT withdrawal_orders_check5,
  DROP CONSTRAINT withdrawal_orders_check6,
  DROP CONSTRAINT withdrawal_orders_check7,
  DROP CONSTRAINT withdrawal_orders_check8,
  DROP CONSTRAINT withdrawal_orders_check9,
  DROP CONSTRAINT withdrawal_orders_hold_has_dispute,
  ADD CONSTRAINT withdrawal_orders_rules CHECK (withdrawal_orders_rules_hold(status, amount_total_minor, fee_total_minor, fee_recognized_minor, filled_minor, reserved_minor, remaining_minor, refunded_minor, settled_splits, max_splits, approval_expires_at, closed_at, dispute, funds_on_hold));

ALTER TABLE withdrawal_policies
  DROP CONSTRAINT withdrawal_policies_approval_threshold_minor_check,
  ALTER COLUMN approval_threshold_minor TYPE withdrawal_policies_approval_threshold_minor,
  DROP CONSTRAINT withdrawal_policies_approval_ttl_seconds_check,
  ALTER COLUMN approval_ttl_seconds TYPE withdrawal_policies_approval_ttl_seconds,
  DROP CONSTRAINT withdrawal_policies_expires_in_seconds_check,
  ALTER COLUMN expires_in_seconds TYPE withdrawal_policies_expires_in_seconds,
  DROP CONSTRAINT withdrawal_policies_max_amount_minor_check,
  ALTER COLUMN max_amount_minor TYPE withdrawal_policies_max_amount_minor,
  DROP CONSTRAINT withdrawal_policies_max_splits_check,
  ALTER COLUMN max_splits TYPE withdrawal_policies_max_splits,
  DROP CONSTRAINT withdrawal_policies_min_amount_minor_check,
  ALTER COLUMN min_amount_minor TYPE withdrawal_policies_min_amount_minor;
