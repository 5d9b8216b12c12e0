import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/ops/metrics.ts';
import { loadConfig } from '../../src/platform/config.ts';
import { SecretBox } from '../../src/platform/crypto.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { ProviderAdapterCache } from '../../src/slip-providers/adapters.ts';
import { credentialsPurpose } from '../../src/slip-providers/credentials.ts';
import type { ProviderSettingRow } from '../../src/slip-providers/repository.ts';
import { SLIPOK_CREDENTIALS } from './support.ts';

/**
 * The adapter cache: one instance per brand, slot and credentials version (so a provider account's circuit breaker
 * sees its failures across slips), a new one when the credentials change, a bounded size, and credentials that
 * open only for the brand, slot and provider they were sealed for.
 */

const box = new SecretBox(Buffer.alloc(32, 3));
const providers = loadConfig({ LOG_LEVEL: 'silent' }).slip_providers;
const NOW = new Date('2026-08-01T00:00:00.000Z');

function row(white_label_id: string, credentials_version: string, sealed_for = white_label_id): ProviderSettingRow {
  return {
    white_label_id,
    livemode: true,
    slot: 'primary',
    provider: 'slipok',
    credentials_sealed: box.seal(JSON.stringify(SLIPOK_CREDENTIALS), credentialsPurpose(sealed_for, 'primary', 'slipok')),
    credential_hint: '••••AbCd',
    credentials_version,
    credentials_set_at: NOW,
    created_at: NOW,
    updated_at: NOW,
  };
}

function cache(max_size?: number): ProviderAdapterCache {
  return new ProviderAdapterCache({ secretBox: box, logger: createLogger('silent'), metrics: createMetrics(), providers, ...(max_size === undefined ? {} : { max_size }) });
}

describe('the provider adapter cache', () => {
  it('keeps one instance per brand, slot and credentials version, and makes a new one for new credentials', () => {
    const adapters = cache();
    const first = adapters.adapterOf(row('wl_A', '1'));
    expect(adapters.adapterOf(row('wl_A', '1')).adapter).toBe(first.adapter);
    const rotated = adapters.adapterOf(row('wl_A', '2'));
    expect(rotated.adapter).not.toBe(first.adapter);
    expect(adapters.adapterOf(row('wl_B', '1')).adapter).not.toBe(first.adapter);
    adapters.forgetBrand('wl_A');
    expect(adapters.size).toBe(1);
  });

  it('is bounded: the least recently used instance goes first', () => {
    const adapters = cache(2);
    const a = adapters.adapterOf(row('wl_A', '1'));
    adapters.adapterOf(row('wl_B', '1'));
    adapters.adapterOf(row('wl_A', '1'));
    adapters.adapterOf(row('wl_C', '1'));
    expect(adapters.size).toBe(2);
    expect(adapters.adapterOf(row('wl_A', '1')).adapter).toBe(a.adapter);
  });

  it('does not open credentials sealed for another brand', () => {
    expect(() => cache().adapterOf(row('wl_A', '1', 'wl_B'))).toThrow();
  });
});
