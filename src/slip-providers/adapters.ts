import { invariant } from '../platform/assert.ts';
import type { SlipProviderSettings } from '../platform/config.ts';
import type { SecretBox } from '../platform/crypto.ts';
import type { Logger } from '../platform/logger.ts';
import type { Metrics } from '../ops/metrics.ts';
import type { ProviderVerifier } from '../verification/provider-verifier.ts';
import type { ProviderAlert } from '../verification/provider-http.ts';
import { adapterOf, credentialsPurpose, settingOf } from './credentials.ts';
import type { ProviderName, ProviderSettingRow, ProviderSlot } from './repository.ts';

/**
 * The adapter instances of the brands' provider accounts, kept between slips so that each account's circuit
 * breaker sees its consecutive failures. An instance is keyed by brand, slot and credentials version: a
 * rotation (a new version) makes a new instance with the new credentials, and the old one ages out. The map
 * is bounded; the least recently used instance goes first (its breaker state with it, which only costs a
 * failing provider a few more calls before its breaker opens again).
 */

export const DEFAULT_ADAPTER_CACHE_SIZE = 1_000;

export interface AdapterCacheDependencies {
  secretBox: SecretBox;
  logger: Logger;
  metrics: Metrics;
  providers: Record<ProviderName, SlipProviderSettings>;
  max_size?: number;
}

export interface CachedAdapter {
  provider: ProviderName;
  slot: ProviderSlot;
  adapter: ProviderVerifier;
}

export class ProviderAdapterCache {
  private readonly entries = new Map<string, CachedAdapter>();
  private readonly max_size: number;

  constructor(private readonly deps: AdapterCacheDependencies) {
    this.max_size = deps.max_size ?? DEFAULT_ADAPTER_CACHE_SIZE;
    invariant(Number.isSafeInteger(this.max_size) && this.max_size > 0, 'the adapter cache holds at least one adapter');
  }

  get size(): number {
    return this.entries.size;
  }

  /** The adapter of a stored setting, made (credentials opened) only when it is not cached. */
  adapterOf(row: ProviderSettingRow): CachedAdapter {
    const key = `${row.white_label_id}|${row.livemode ? 'live' : 'test'}|${row.slot}|${row.credentials_version}`;
    const cached = this.entries.get(key);
    if (cached !== undefined) {
      // Map keeps insertion order: moving the entry to the end makes the first one the least recently used.
      this.entries.delete(key);
      this.entries.set(key, cached);
      return cached;
    }
    const setting = settingOf(row.provider, this.deps.secretBox.open(row.credentials_sealed, credentialsPurpose(row.white_label_id, row.slot, row.provider)));
    const made: CachedAdapter = { provider: row.provider, slot: row.slot, adapter: adapterOf(setting, this.deps.providers[row.provider], (alert) => this.alert(row, alert)) };
    this.entries.set(key, made);
    if (this.entries.size > this.max_size) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    return made;
  }

  /** Forgets a brand's adapters at once when its settings change in this process; other processes age them out. */
  forgetBrand(white_label_id: string): void {
    for (const key of [...this.entries.keys()]) {
      if (key.startsWith(`${white_label_id}|`)) this.entries.delete(key);
    }
  }

  /** An operator alert: a metric and a warning that name the provider, brand, slot and reason, never a credential. */
  private alert(row: ProviderSettingRow, alert: ProviderAlert): void {
    const labels = { provider: alert.provider, white_label_id: row.white_label_id };
    this.deps.metrics.slip_provider_alerts_total.inc({ ...labels, reason: alert.reason });
    if (alert.reason === 'quota_exhausted') this.deps.metrics.slip_provider_remaining_quota.set({ ...labels, slot: row.slot }, 0);
    this.deps.logger.warn({ provider: alert.provider, white_label_id: row.white_label_id, slot: row.slot, reason: alert.reason }, 'slip provider needs an operator');
  }
}
