import { z } from 'zod';
import type { SlipProviderSettings } from '../platform/config.ts';
import { createEasySlipVerifier } from '../verification/easyslip-adapter.ts';
import type { ProviderVerifier } from '../verification/provider-verifier.ts';
import type { ProviderAlert } from '../verification/provider-http.ts';
import { createRdcwVerifier } from '../verification/rdcw-adapter.ts';
import { createSlipOkVerifier } from '../verification/slipok-adapter.ts';
import type { ProviderName, ProviderSlot } from './repository.ts';

/**
 * Each provider's credentials: their shape as the back office takes them, the hint shown instead of them,
 * the purpose they are sealed under, and the adapter they make (src/verification/*-adapter.ts).
 */

export const PROVIDER_NAMES = ['slipok', 'easyslip', 'rdcw'] as const satisfies readonly ProviderName[];
export const PROVIDER_SLOTS = ['primary', 'fallback'] as const satisfies readonly ProviderSlot[];

/** Printable text without control characters: a key with one would fail every request like a network error. */
const secretText = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

const slipOkCredentials = z.object({ branch_id: z.string().regex(/^[0-9]{1,20}$/, 'digits'), key: secretText }).strict();
const easySlipCredentials = z.object({ key: secretText }).strict();
const rdcwCredentials = z.object({ client_id: secretText, client_secret: secretText }).strict();

export type SlipOkCredentials = z.infer<typeof slipOkCredentials>;
export type EasySlipCredentials = z.infer<typeof easySlipCredentials>;
export type RdcwCredentials = z.infer<typeof rdcwCredentials>;

/** The body of a slot's setting: which provider, and its credentials in that provider's shape. */
export const providerSettingBodySchema = z.discriminatedUnion('provider', [
  z.object({ provider: z.literal('slipok'), credentials: slipOkCredentials }).strict(),
  z.object({ provider: z.literal('easyslip'), credentials: easySlipCredentials }).strict(),
  z.object({ provider: z.literal('rdcw'), credentials: rdcwCredentials }).strict(),
]);

export type ProviderSettingBody = z.infer<typeof providerSettingBodySchema>;

/** The credential a hint shows the end of: the one that is secret (SlipOK's branch id and RDCW's client id are names). */
function secretOf(setting: ProviderSettingBody): string {
  if (setting.provider === 'rdcw') return setting.credentials.client_secret;
  return setting.credentials.key;
}

/** Shorter secrets show nothing of themselves: four characters of a short key would be a good part of it. */
const HINT_MIN_SECRET_LENGTH = 16;

/** What the back office shows instead of the credentials: the last four characters of a long secret, like `key_last4`. */
export function credentialHint(setting: ProviderSettingBody): string {
  const secret = secretOf(setting);
  return secret.length < HINT_MIN_SECRET_LENGTH ? '••••' : `••••${secret.slice(-4)}`;
}

/**
 * The additional data a brand's credentials are sealed with: brand, slot and provider, so that a sealed value
 * copied to another brand's row, slot or provider does not open.
 */
export function credentialsPurpose(white_label_id: string, slot: ProviderSlot, provider: ProviderName): string {
  return `slip_provider_settings.credentials_sealed:${white_label_id}:${slot}:${provider}`;
}

/** Reads opened credentials back into their provider's shape; a mismatch is a fault, not an input error. */
export function settingOf(provider: ProviderName, opened: string): ProviderSettingBody {
  return providerSettingBodySchema.parse({ provider, credentials: JSON.parse(opened) as unknown });
}

/** One provider account's adapter, with the deployment's URL and resilience settings for that provider. */
export function adapterOf(setting: ProviderSettingBody, settings: SlipProviderSettings, on_alert: (alert: ProviderAlert) => void): ProviderVerifier {
  const common = {
    ...(settings.url === null ? {} : { url: settings.url }),
    timeout_ms: settings.timeout_ms,
    max_attempts: settings.max_attempts,
    breaker_threshold: settings.breaker_threshold,
    breaker_half_open_after_ms: settings.breaker_half_open_after_ms,
    on_alert,
  };
  if (setting.provider === 'slipok') return createSlipOkVerifier({ ...common, ...setting.credentials });
  if (setting.provider === 'easyslip') return createEasySlipVerifier({ ...common, ...setting.credentials });
  return createRdcwVerifier({ ...common, ...setting.credentials });
}
