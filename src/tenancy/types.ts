import type { BackofficeRole } from '../platform/access.ts';

/** Row and view types of the tenancy module. Each column of the tables is described in 0001. */
export type AccountStatus = 'active' | 'suspended';
export type KeyStatus = 'active' | 'suspended' | 'revoked';

export interface BrandRow {
  white_label_id: string;
  name: string;
  status: AccountStatus;
  /** Origin of the brand's hosted checkout pages (migration 0018); null: the deployment's CHECKOUT_BASE_URL. */
  checkout_base_url: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface MerchantRow {
  white_label_id: string;
  merchant_id: string;
  name: string;
  status: AccountStatus;
  /** A merchant the service runs itself (the sandbox counterparty): invisible to the back office and the CLI. */
  system_owned: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface ApiKeyRow {
  white_label_id: string;
  merchant_id: string;
  api_key_id: string;
  livemode: boolean;
  key_hash: string;
  key_last4: string;
  signing_secret_sealed: string;
  scopes: string[];
  status: KeyStatus;
  created_at: Date;
  updated_at: Date;
  revoked_at: Date | null;
}

export interface BackofficeCredentialRow {
  white_label_id: string | null;
  credential_id: string;
  name: string;
  role: BackofficeRole;
  token_hash: string;
  status: KeyStatus;
  /** The person the credential was issued to (migration 0027); never changes. */
  staff_id: string;
  created_at: Date;
  updated_at: Date;
}

/**
 * One person who works in a back office (migration 0027). Four eyes and the escalation rule compare these,
 * not credentials, since one person may hold several credentials.
 */
export interface StaffIdentityRow {
  /** The brand the person works for; null for platform staff (platform administrators). */
  white_label_id: string | null;
  staff_id: string;
  name: string;
  created_at: Date;
}
