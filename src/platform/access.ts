/**
 * Who may do what, as every layer names it: the scopes of a merchant's integration key, the roles of a
 * back-office credential, and the actor an administrative change is written under. The tenancy module
 * issues keys and credentials with these; the HTTP layer checks them on each request; the audit log
 * records the actor. They live here, below both, so that neither has to import the other.
 */

/** Scope names granted to integration keys (the spec leaves them unnamed; see docs/decisions). */
export const API_KEY_SCOPES = ['pay:read', 'pay:write', 'events:read'] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

export type BackofficeRole = 'platform_admin' | 'operator' | 'reviewer';

/** Who performed an administrative change; written to the audit log with it. */
export interface Actor {
  /** `api_key`: a merchant's own sandbox change (its test clocks), named by the key that signed it. */
  actor_type: 'backoffice_credential' | 'cli' | 'system' | 'api_key';
  actor_id: string;
  request_id: string | null;
}
