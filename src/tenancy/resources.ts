import { z } from 'zod';
import { timestampSchema, type Describes } from '../http/response-fields.ts';
import type { ApiKeyView, BackofficeCredentialView, BrandView, MerchantView } from './service.ts';
import { API_KEY_SCOPES } from '../platform/access.ts';

/** Response schemas of the tenancy resources (the OpenAPI document, src/openapi/). */

const accountStatus = z.enum(['active', 'suspended']);
const keyStatus = z.enum(['active', 'suspended', 'revoked']);

export const brandSchema = z
  .object({
    object: z.literal('brand'),
    id: z.string(),
    name: z.string(),
    status: accountStatus,
    checkout_base_url: z.string().nullable().meta({ description: "Origin of the brand's hosted checkout pages; null: the deployment's default." }),
    created_at: timestampSchema,
  })
  .meta({ id: 'brand' });

export const merchantSchema = z
  .object({ object: z.literal('merchant'), id: z.string(), white_label_id: z.string(), name: z.string(), status: accountStatus, created_at: timestampSchema })
  .meta({ id: 'merchant' });

const apiKeyFields = {
  object: z.literal('api_key'),
  id: z.string(),
  white_label_id: z.string(),
  merchant_id: z.string(),
  livemode: z.boolean(),
  key_last4: z.string(),
  scopes: z.array(z.enum(API_KEY_SCOPES)),
  status: keyStatus,
  created_at: timestampSchema,
  revoked_at: timestampSchema.nullable(),
};

export const apiKeySchema = z.object(apiKeyFields).meta({ id: 'api_key' });

/** The one answer that carries a key's secrets: they are never shown again. */
export const createdApiKeySchema = z
  .object({
    ...apiKeyFields,
    api_key: z.string().meta({ description: 'Secret; shown in this answer only.' }),
    signing_secret: z.string().meta({ description: 'Secret; shown in this answer only.' }),
  })
  .meta({ id: 'api_key_created' });

const credentialFields = {
  object: z.literal('backoffice_credential'),
  id: z.string(),
  white_label_id: z.string().nullable(),
  name: z.string(),
  role: z.enum(['platform_admin', 'operator', 'reviewer']),
  status: keyStatus,
  staff_id: z.string().meta({ description: 'The person the credential was issued to; four eyes counts people, not credentials.' }),
  created_at: timestampSchema,
};

export const backofficeCredentialSchema = z.object(credentialFields).meta({ id: 'backoffice_credential' });

export const createdBackofficeCredentialSchema = z
  .object({ ...credentialFields, token: z.string().meta({ description: 'Secret bearer token; shown in this answer only.' }) })
  .meta({ id: 'backoffice_credential_created' });

const _brand: Describes<typeof brandSchema, BrandView> = true;
const _merchant: Describes<typeof merchantSchema, MerchantView> = true;
const _apiKey: Describes<typeof apiKeySchema, Omit<ApiKeyView, 'scopes'> & { scopes: (typeof API_KEY_SCOPES)[number][] }> = true;
const _credential: Describes<typeof backofficeCredentialSchema, BackofficeCredentialView> = true;
const _createdCredential: Describes<typeof createdBackofficeCredentialSchema, BackofficeCredentialView & { token: string }> = true;
void [_brand, _merchant, _apiKey, _credential, _createdCredential];
