import { z } from 'zod';
import { timestampSchema, type Describes } from '../http/response-fields.ts';
import { PROVIDER_NAMES, PROVIDER_SLOTS } from './credentials.ts';
import type { ConnectionTestView, ProviderSettingsView } from './service.ts';

/** Response schemas of a brand's slip providers (the OpenAPI document, src/openapi/). Credentials never appear. */

const providerSlotSchema = z
  .object({
    provider: z.enum(PROVIDER_NAMES),
    credential_hint: z.string().meta({ description: 'The last four characters of a long secret (`••••abcd`), or `••••`; never the credentials.' }),
    credentials_set_at: timestampSchema,
    updated_at: timestampSchema,
  })
  .meta({ id: 'slip_provider_slot' });

export const providerSettingsSchema = z
  .object({
    object: z.literal('slip_provider_settings'),
    white_label_id: z.string(),
    livemode: z.literal(true),
    primary: providerSlotSchema.nullable().meta({ description: "The provider asked first; null: the deployment's generic verifier, if any." }),
    fallback: providerSlotSchema.nullable().meta({ description: 'The provider asked when the primary cannot answer (never after "no such transfer").' }),
  })
  .meta({ id: 'slip_provider_settings' });

export const connectionTestSchema = z
  .object({
    object: z.literal('slip_provider_connection_test'),
    white_label_id: z.string(),
    slot: z.enum(PROVIDER_SLOTS),
    provider: z.enum(PROVIDER_NAMES),
    ok: z.boolean(),
    remaining_quota: z.number().int().nullable(),
    failure_reason: z.string().nullable(),
    tested_at: timestampSchema,
  })
  .meta({ id: 'slip_provider_connection_test' });

const _settings: Describes<typeof providerSettingsSchema, ProviderSettingsView> = true;
const _connection_test: Describes<typeof connectionTestSchema, ConnectionTestView> = true;
void [_settings, _connection_test];
