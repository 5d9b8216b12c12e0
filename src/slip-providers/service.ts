import type { Actor } from '../platform/access.ts';
import type { AuditTrail } from '../platform/audit.ts';
import type { Clock } from '../platform/clock.ts';
import type { SecretBox } from '../platform/crypto.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { ApiError } from '../platform/errors.ts';
import type { Metrics } from '../ops/metrics.ts';
import type { ProviderAdapterCache } from './adapters.ts';
import { PROVIDER_NAMES, credentialHint, credentialsPurpose, type ProviderSettingBody } from './credentials.ts';
import * as repository from './repository.ts';
import type { ProviderName, ProviderSettingRow, ProviderSlot } from './repository.ts';

/**
 * A brand's live slip-verification providers, as the back office and the CLI manage them: a primary and an
 * optional fallback, each a provider and its credentials sealed at rest (src/platform/crypto.ts SecretBox).
 * Credentials go in and never come out: a view shows the provider, a hint and when they were set. Each change
 * writes its audit row in its transaction, without the credentials. The connection test reads the setting,
 * then asks the provider with no transaction open.
 */

export interface ProviderSlotView {
  provider: ProviderName;
  credential_hint: string;
  credentials_set_at: string;
  updated_at: string;
}

export interface ProviderSettingsView {
  object: 'slip_provider_settings';
  white_label_id: string;
  livemode: true;
  primary: ProviderSlotView | null;
  fallback: ProviderSlotView | null;
}

export interface ConnectionTestView {
  object: 'slip_provider_connection_test';
  white_label_id: string;
  slot: ProviderSlot;
  provider: ProviderName;
  ok: boolean;
  /** Verifications left; null when the provider says unlimited, or when the test failed. */
  remaining_quota: number | null;
  /** Why the test failed (quota_exhausted, credentials_refused, unreachable, unexpected_answer); null when it passed. */
  failure_reason: string | null;
  tested_at: string;
}

export interface SlipProviderServiceDependencies {
  database: Database;
  clock: Clock;
  secretBox: SecretBox;
  metrics: Metrics;
  audit: AuditTrail;
  adapters: ProviderAdapterCache;
  /** Whether the brand exists, read in the caller's transaction (the tenancy module owns brands). */
  brandExists: (db: Queryable, white_label_id: string) => Promise<boolean>;
}

function slotView(row: ProviderSettingRow | undefined): ProviderSlotView | null {
  if (row === undefined) return null;
  return { provider: row.provider, credential_hint: row.credential_hint, credentials_set_at: row.credentials_set_at.toISOString(), updated_at: row.updated_at.toISOString() };
}

function settingsView(white_label_id: string, rows: readonly ProviderSettingRow[]): ProviderSettingsView {
  return {
    object: 'slip_provider_settings',
    white_label_id,
    livemode: true,
    primary: slotView(rows.find((row) => row.slot === 'primary')),
    fallback: slotView(rows.find((row) => row.slot === 'fallback')),
  };
}

/** A refusal of a slot change that the brand's other slot forbids; nothing is written. */
function slotRefused(reason: 'primary_required' | 'fallback_set'): ApiError {
  return new ApiError('validation_error', { details: { fields: [{ path: 'slot', reason }] } });
}

export class SlipProviderService {
  constructor(private readonly deps: SlipProviderServiceDependencies) {}

  async view(white_label_id: string): Promise<ProviderSettingsView> {
    if (!(await this.deps.brandExists(this.deps.database, white_label_id))) throw new ApiError('resource_not_found');
    return settingsView(white_label_id, await repository.settingsOfBrand(this.deps.database, white_label_id, true));
  }

  /** Sets or rotates a slot's provider and credentials. A fallback needs a primary. */
  async set(actor: Actor, white_label_id: string, slot: ProviderSlot, setting: ProviderSettingBody): Promise<ProviderSettingsView> {
    const hint = credentialHint(setting);
    const rows = await this.deps.database.transaction(async (tx) => {
      if (!(await this.deps.brandExists(tx, white_label_id))) throw new ApiError('resource_not_found');
      const before = await repository.settingsOfBrand(tx, white_label_id, true, true);
      if (slot === 'fallback' && !before.some((row) => row.slot === 'primary')) throw slotRefused('primary_required');
      const previous = before.find((row) => row.slot === slot);
      await repository.upsertSetting(tx, {
        white_label_id,
        livemode: true,
        slot,
        provider: setting.provider,
        credentials_sealed: this.deps.secretBox.seal(JSON.stringify(setting.credentials), credentialsPurpose(white_label_id, slot, setting.provider)),
        credential_hint: hint,
        now: this.deps.clock.now(),
      });
      const action = previous === undefined ? 'slip_provider.set' : 'slip_provider.rotated';
      await this.deps.audit.audit(tx, actor, white_label_id, action, 'brand', white_label_id, { slot, provider: setting.provider, from_provider: previous?.provider ?? null, credential_hint: hint });
      return repository.settingsOfBrand(tx, white_label_id, true);
    });
    this.forget(white_label_id, slot);
    return settingsView(white_label_id, rows);
  }

  /** Removes a slot. The primary goes only after the fallback, so that a fallback is never left alone. */
  async remove(actor: Actor, white_label_id: string, slot: ProviderSlot): Promise<ProviderSettingsView> {
    const rows = await this.deps.database.transaction(async (tx) => {
      if (!(await this.deps.brandExists(tx, white_label_id))) throw new ApiError('resource_not_found');
      const before = await repository.settingsOfBrand(tx, white_label_id, true, true);
      const removed = before.find((row) => row.slot === slot);
      if (removed === undefined) throw new ApiError('resource_not_found');
      if (slot === 'primary' && before.some((row) => row.slot === 'fallback')) throw slotRefused('fallback_set');
      await repository.deleteSetting(tx, white_label_id, true, slot);
      await this.deps.audit.audit(tx, actor, white_label_id, 'slip_provider.removed', 'brand', white_label_id, { slot, provider: removed.provider });
      return repository.settingsOfBrand(tx, white_label_id, true);
    });
    this.forget(white_label_id, slot);
    return settingsView(white_label_id, rows);
  }

  /** New credentials, or none: this process's adapters of the brand and the slot's last quota reading go. */
  private forget(white_label_id: string, slot: ProviderSlot): void {
    this.deps.adapters.forgetBrand(white_label_id);
    for (const provider of PROVIDER_NAMES) this.deps.metrics.slip_provider_remaining_quota.remove({ provider, white_label_id, slot });
  }

  /**
   * Asks the slot's provider for its quota with the stored credentials. The setting is read first, without a
   * transaction; the provider is asked after, with none open. Nothing is written: the remaining quota goes to
   * the `slip_provider_remaining_quota` gauge.
   */
  async testConnection(white_label_id: string, slot: ProviderSlot): Promise<ConnectionTestView> {
    if (!(await this.deps.brandExists(this.deps.database, white_label_id))) throw new ApiError('resource_not_found');
    const row = (await repository.settingsOfBrand(this.deps.database, white_label_id, true)).find((candidate) => candidate.slot === slot);
    if (row === undefined) throw new ApiError('resource_not_found');
    const check = await this.deps.adapters.adapterOf(row).adapter.testConnection();
    const labels = { provider: row.provider, white_label_id, slot };
    if (check.ok && check.remaining_quota !== null) this.deps.metrics.slip_provider_remaining_quota.set(labels, check.remaining_quota);
    if (check.ok && check.remaining_quota === null) this.deps.metrics.slip_provider_remaining_quota.remove(labels);
    return {
      object: 'slip_provider_connection_test',
      white_label_id,
      slot,
      provider: row.provider,
      ok: check.ok,
      remaining_quota: check.ok ? check.remaining_quota : null,
      failure_reason: check.ok ? null : check.reason,
      tested_at: this.deps.clock.now().toISOString(),
    };
  }
}
