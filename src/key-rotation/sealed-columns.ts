import type { SecretBox } from '../platform/crypto.ts';
import { clientSecretPurpose } from '../backoffice-console/oidc-settings.ts';
import { DERIVATION_TABLE, derivationSealPurpose } from '../platform/derivation-key.ts';
import { ACCOUNT_NUMBER_PURPOSE, PROMPTPAY_ID_PURPOSE } from '../beneficiaries/service.ts';
import { SENDER_ACCOUNT_PURPOSE } from '../deposits/creation.ts';
import { GATEWAY_ACCOUNT_PURPOSE } from '../deposits/policy.ts';
import type { EventFieldSealer } from '../events/sealed-fields.ts';
import { responsePurpose } from '../idempotency/service.ts';
import { credentialsPurpose } from '../slip-providers/credentials.ts';
import type { ProviderName, ProviderSlot } from '../slip-providers/repository.ts';
import type { EvidenceCipher } from '../slips/evidence-store.ts';
import { FIELDS_PURPOSE, TRANSFER_PURPOSE } from '../slips/service.ts';
import { SIGNING_SECRET_PURPOSE } from '../tenancy/service.ts';
import { PRIVATE_KEY_PURPOSE } from '../webhooks/signing-keys.ts';

/**
 * Every column that holds a value sealed under the master key, for rotation (docs/decisions/master-key-rotation.md).
 * Rotation is a maintenance pass over stored bytes, not a business operation, so it reads the owning modules'
 * columns directly: each module keeps its sealing purpose, exported beside the code that seals, and this list
 * names where the sealed values rest. test/key-rotation/sealed-columns.test.ts fails when a migration adds a
 * column named `*_sealed` or `wrapped_key` that is not listed here.
 */

/** The master keys a rotation opens with and seals under. */
export interface Rekeying {
  box: SecretBox;
  evidence: EvidenceCipher;
  events: EventFieldSealer;
}

export type StoredRow = Readonly<Record<string, unknown>>;

/**
 * - `sealed`: a SecretBox value (or null).
 * - `sealed_or_clear`: a SecretBox value, or plain text written before the column was sealed (left as it is).
 * - `wrapped_evidence_key`: a slip evidence data key wrapped under the evidence key (the image is not touched).
 * - `event_fields`: an event envelope whose `qr_payload` values are sealed inside the JSON text.
 */
export type SealedColumnKind = 'sealed' | 'sealed_or_clear' | 'wrapped_evidence_key' | 'event_fields';

export interface SealedColumn {
  table: string;
  column: string;
  /** The primary key, in its index's order: rotation walks the table by it. */
  key_columns: readonly string[];
  /** Further columns the purpose is made of. */
  context_columns?: readonly string[];
  kind: SealedColumnKind;
  /** The stored value sealed again under the current master key. */
  reseal(value: string, row: StoredRow, keys: Rekeying): string;
}

function constantPurpose(purpose: string): SealedColumn['reseal'] {
  return (value, _row, keys) => keys.box.reseal(value, purpose);
}

function sealed(table: string, column: string, key_columns: readonly string[], purpose: string): SealedColumn {
  return { table, column, key_columns, kind: 'sealed', reseal: constantPurpose(purpose) };
}

export const SEALED_COLUMNS: readonly SealedColumn[] = [
  {
    table: DERIVATION_TABLE,
    column: 'key_sealed',
    key_columns: ['purpose'],
    kind: 'sealed',
    reseal: (value, row, keys) => keys.box.reseal(value, derivationSealPurpose(String(row.purpose))),
  },
  sealed('api_keys', 'signing_secret_sealed', ['white_label_id', 'api_key_id'], SIGNING_SECRET_PURPOSE),
  sealed('webhook_signing_keys', 'private_key_sealed', ['white_label_id', 'kid'], PRIVATE_KEY_PURPOSE),
  {
    table: 'slip_provider_settings',
    column: 'credentials_sealed',
    key_columns: ['white_label_id', 'livemode', 'slot'],
    context_columns: ['provider'],
    kind: 'sealed',
    reseal: (value, row, keys) =>
      keys.box.reseal(value, credentialsPurpose(String(row.white_label_id), row.slot as ProviderSlot, row.provider as ProviderName)),
  },
  {
    table: 'console_oidc_providers',
    column: 'client_secret_sealed',
    key_columns: ['white_label_id'],
    kind: 'sealed',
    reseal: (value, row, keys) => keys.box.reseal(value, clientSecretPurpose(String(row.white_label_id))),
  },
  sealed('deposit_policies', 'gateway_account_sealed', ['white_label_id', 'livemode'], GATEWAY_ACCOUNT_PURPOSE),
  sealed('deposit_orders', 'sender_account_sealed', ['white_label_id', 'deposit_id'], SENDER_ACCOUNT_PURPOSE),
  sealed('senders', 'account_sealed', ['white_label_id', 'sender_id'], SENDER_ACCOUNT_PURPOSE),
  sealed('beneficiaries', 'account_number_sealed', ['white_label_id', 'beneficiary_id'], ACCOUNT_NUMBER_PURPOSE),
  sealed('beneficiaries', 'promptpay_id_sealed', ['white_label_id', 'beneficiary_id'], PROMPTPAY_ID_PURPOSE),
  sealed('slip_receipts', 'fields_sealed', ['white_label_id', 'receipt_id'], FIELDS_PURPOSE),
  sealed('slip_receipts', 'transfer_sealed', ['white_label_id', 'receipt_id'], TRANSFER_PURPOSE),
  {
    table: 'slip_receipts',
    column: 'wrapped_key',
    key_columns: ['white_label_id', 'receipt_id'],
    kind: 'wrapped_evidence_key',
    reseal: (value, row, keys) => keys.evidence.rewrap({ white_label_id: String(row.white_label_id), blob_key: String(row.receipt_id) }, value),
  },
  {
    table: 'idempotency_records',
    column: 'response_body',
    key_columns: ['white_label_id', 'merchant_id', 'livemode', 'idempotency_key'],
    kind: 'sealed_or_clear',
    reseal: (value, row, keys) =>
      keys.box.reseal(
        value,
        responsePurpose({
          white_label_id: String(row.white_label_id),
          merchant_id: String(row.merchant_id),
          livemode: row.livemode === true,
          idempotency_key: String(row.idempotency_key),
        }),
      ),
  },
  {
    table: 'events',
    column: 'envelope',
    key_columns: ['white_label_id', 'merchant_id', 'livemode', 'sequence'],
    kind: 'event_fields',
    reseal: (value, _row, keys) => keys.events.reseal(value),
  },
];
