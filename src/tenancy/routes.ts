import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import type { RouteModule, RouteRegistrar } from '../http/context.ts';
import { API_KEY_SCOPES } from '../platform/access.ts';
import { idText, nameSchema, staffIdText } from './schemas.ts';
import { actorOf, brandToActOn, requireOwnBrand, scopeOf } from '../http/backoffice-scope.ts';
import { listSchema } from '../http/response-fields.ts';
import { apiKeySchema, backofficeCredentialSchema, brandSchema, createdApiKeySchema, createdBackofficeCredentialSchema, merchantSchema } from './resources.ts';
import type { TenancyService } from './service.ts';

/**
 * Back-office administration of tenants and credentials (`/v1/bo/*`). The platform administrator
 * manages every brand; a brand operator manages the merchants and keys of their own brand only, and
 * another brand's ids answer 404. The CLI calls these same service functions, directly or through
 * these routes when the service holds the embedded database.
 */

/** What the tenancy routes call. */
export interface TenancyRouteDependencies {
  tenancy: TenancyService;
}

/** The tenancy routes, on the services they call. */
export function tenancyRoutes(services: TenancyRouteDependencies): RouteModule {
  return (registrar) => registerTenancyRoutes(registrar, services);
}

function registerTenancyRoutes(registrar: RouteRegistrar, services: TenancyRouteDependencies): void {
  const tenancy = services.tenancy;

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/brands',
    summary: 'Create a brand',
    responses: { 201: { description: 'The new brand.', schema: brandSchema } },
    roles: ['platform_admin'],
    body: z.object({ name: nameSchema }).strict(),
    async handler({ context, body }) {
      return { status: 201, body: await tenancy.createBrand(actorOf(context), body) };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/brands',
    summary: 'List brands',
    responses: { 200: { description: 'Every brand.', schema: listSchema(brandSchema) } },
    roles: ['platform_admin'],
    async handler() {
      return { status: 200, body: { object: 'list', data: await tenancy.listBrands() } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/brands/:brand_id',
    summary: 'Read a brand',
    responses: { 200: { description: 'The brand.', schema: brandSchema } },
    roles: ['platform_admin', 'operator'],
    async handler({ context, params }) {
      requireOwnBrand(context, params.brand_id ?? '');
      const brand = await tenancy.getBrand(params.brand_id ?? '');
      if (!brand) throw new ApiError('resource_not_found');
      return { status: 200, body: brand };
    },
  });

  for (const [action, status] of [['suspend', 'suspended'], ['resume', 'active']] as const) {
    registrar.backoffice({
      method: 'POST',
      url: `/v1/bo/brands/:brand_id/${action}`,
      summary: 'Suspend or resume a brand',
      responses: { 200: { description: 'The brand after the change.', schema: brandSchema } },
      roles: ['platform_admin'],
      async handler({ context, params }) {
        return { status: 200, body: await tenancy.setBrandStatus(actorOf(context), params.brand_id ?? '', status) };
      },
    });
    registrar.backoffice({
      method: 'POST',
      url: `/v1/bo/merchants/:merchant_id/${action}`,
      summary: 'Suspend or resume a merchant',
      responses: { 200: { description: 'The merchant after the change.', schema: merchantSchema } },
      roles: ['platform_admin', 'operator'],
      async handler({ context, params }) {
        return { status: 200, body: await tenancy.setMerchantStatus(actorOf(context), params.merchant_id ?? '', scopeOf(context), status) };
      },
    });
    registrar.backoffice({
      method: 'POST',
      url: `/v1/bo/api-keys/:api_key_id/${action}`,
      summary: 'Suspend or resume an API key',
      responses: { 200: { description: 'The key after the change.', schema: apiKeySchema } },
      errors: ['api_key_already_revoked'],
      roles: ['platform_admin', 'operator'],
      async handler({ context, params }) {
        return {
          status: 200,
          body: await tenancy.setApiKeyStatus(actorOf(context), params.api_key_id ?? '', scopeOf(context), status === 'active' ? 'active' : 'suspended'),
        };
      },
    });
  }

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/api-keys/:api_key_id/revoke',
    summary: 'Revoke an API key',
    responses: { 200: { description: 'The revoked key.', schema: apiKeySchema } },
    roles: ['platform_admin', 'operator'],
    async handler({ context, params }) {
      return { status: 200, body: await tenancy.setApiKeyStatus(actorOf(context), params.api_key_id ?? '', scopeOf(context), 'revoked') };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/merchants',
    summary: 'Create a merchant',
    responses: { 201: { description: 'The new merchant.', schema: merchantSchema } },
    errors: ['resource_not_found'],
    roles: ['platform_admin', 'operator'],
    body: z.object({ name: nameSchema, white_label_id: idText.optional() }).strict(),
    async handler({ context, body }) {
      const brand = brandToActOn(context, body.white_label_id);
      return { status: 201, body: await tenancy.createMerchant(actorOf(context), { white_label_id: brand, name: body.name }) };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/merchants',
    summary: 'List merchants',
    responses: { 200: { description: "The brand's merchants.", schema: listSchema(merchantSchema) } },
    errors: ['resource_not_found'],
    roles: ['platform_admin', 'operator'],
    query: z.object({ white_label_id: idText.optional() }).strict(),
    async handler({ context, query }) {
      const brand = brandToActOn(context, query.white_label_id);
      return { status: 200, body: { object: 'list', data: await tenancy.listMerchants(brand) } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/merchants/:merchant_id',
    summary: 'Read a merchant',
    responses: { 200: { description: 'The merchant.', schema: merchantSchema } },
    roles: ['platform_admin', 'operator', 'reviewer'],
    async handler({ context, params }) {
      const merchant = await tenancy.getMerchant(params.merchant_id ?? '', scopeOf(context));
      if (!merchant) throw new ApiError('resource_not_found');
      return { status: 200, body: merchant };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/merchants/:merchant_id/api-keys',
    summary: 'Create an API key',
    responses: { 201: { description: 'The new key with its secrets, shown this once.', schema: createdApiKeySchema, cache_control: 'no-store' } },
    roles: ['platform_admin', 'operator'],
    body: z
      .object({
        mode: z.enum(['test', 'live']),
        scopes: z.array(z.enum(API_KEY_SCOPES)).min(1).max(API_KEY_SCOPES.length).optional(),
      })
      .strict(),
    async handler({ context, params, body }) {
      const created = await tenancy.createApiKey(actorOf(context), {
        merchant_id: params.merchant_id ?? '',
        scope_white_label_id: scopeOf(context),
        livemode: body.mode === 'live',
        scopes: body.scopes,
      });
      // The secrets appear in this one answer only; it must never be cached by anything in between.
      return { status: 201, body: created, headers: { 'Cache-Control': 'no-store' } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/merchants/:merchant_id/api-keys',
    summary: 'List API keys',
    responses: { 200: { description: "The merchant's keys, without secrets.", schema: listSchema(apiKeySchema) } },
    roles: ['platform_admin', 'operator'],
    async handler({ context, params }) {
      return { status: 200, body: { object: 'list', data: await tenancy.listApiKeys(params.merchant_id ?? '', scopeOf(context)) } };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/credentials',
    summary: 'Create a back-office credential',
    responses: { 201: { description: 'The new credential with its token, shown this once.', schema: createdBackofficeCredentialSchema, cache_control: 'no-store' } },
    errors: ['resource_not_found'],
    roles: ['platform_admin', 'operator'],
    body: z
      .object({
        name: nameSchema,
        role: z.enum(['operator', 'reviewer']),
        white_label_id: idText.optional(),
        // The person who will hold the credential, when they hold one already; without it the credential goes to a new person.
        staff_id: staffIdText.optional(),
      })
      .strict(),
    async handler({ context, body }) {
      const brand = brandToActOn(context, body.white_label_id);
      const created = await tenancy.createBackofficeCredential(actorOf(context), { white_label_id: brand, role: body.role, name: body.name, staff_id: body.staff_id });
      return { status: 201, body: created, headers: { 'Cache-Control': 'no-store' } };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/credentials/:credential_id/revoke',
    summary: 'Revoke a back-office credential',
    responses: { 200: { description: 'The revoked credential.', schema: backofficeCredentialSchema } },
    roles: ['platform_admin', 'operator'],
    async handler({ context, params }) {
      return {
        status: 200,
        body: await tenancy.setBackofficeCredentialStatus(actorOf(context), params.credential_id ?? '', scopeOf(context), 'revoked'),
      };
    },
  });
}
