import { ApiError } from '../platform/errors.ts';
import type { RouteModule, RouteRegistrar } from '../http/context.ts';
import { actorOf, requireOwnBrand } from '../http/backoffice-scope.ts';
import type { BackofficeRole } from '../platform/access.ts';
import { PROVIDER_SLOTS, providerSettingBodySchema } from './credentials.ts';
import type { ProviderSlot } from './repository.ts';
import { connectionTestSchema, providerSettingsSchema } from './resources.ts';
import type { SlipProviderService } from './service.ts';

/**
 * A brand's live slip providers in the back office (`/v1/bo/brands/{brand_id}/slip-providers`). The platform
 * administrator manages every brand; a brand's operator (its administrator) manages its own, since choosing the
 * provider account the brand pays for is the brand's business; a reviewer may not, not even read, since the
 * settings say nothing a review needs. Another brand's id answers 404, an unknown slot 404.
 */

const ROLES: readonly BackofficeRole[] = ['platform_admin', 'operator'];

export interface SlipProviderRouteDependencies {
  slipProviders: SlipProviderService;
}

/** The brand the route names, within the credential's scope, and the slot it names. */
function target(context: Parameters<typeof requireOwnBrand>[0], params: Record<string, string>): { brand_id: string; slot: ProviderSlot } {
  const brand_id = params.brand_id ?? '';
  requireOwnBrand(context, brand_id);
  const slot = PROVIDER_SLOTS.find((candidate) => candidate === params.slot);
  if (slot === undefined) throw new ApiError('resource_not_found');
  return { brand_id, slot };
}

export function slipProviderRoutes(services: SlipProviderRouteDependencies): RouteModule {
  return (registrar) => registerSlipProviderRoutes(registrar, services.slipProviders);
}

function registerSlipProviderRoutes(registrar: RouteRegistrar, slipProviders: SlipProviderService): void {
  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/brands/:brand_id/slip-providers',
    summary: "Read a brand's live slip providers",
    responses: { 200: { description: 'The providers, each with a hint of its credentials, never the credentials.', schema: providerSettingsSchema } },
    errors: ['resource_not_found'],
    roles: ROLES,
    async handler({ context, params }) {
      requireOwnBrand(context, params.brand_id ?? '');
      return { status: 200, body: await slipProviders.view(params.brand_id ?? '') };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/brands/:brand_id/slip-providers/:slot',
    summary: "Set or rotate a brand's primary or fallback slip provider",
    responses: { 200: { description: 'The providers after the change; the credentials are sealed and never shown again.', schema: providerSettingsSchema } },
    errors: ['resource_not_found'],
    roles: ROLES,
    body: providerSettingBodySchema,
    async handler({ context, params, body }) {
      const { brand_id, slot } = target(context, params);
      return { status: 200, body: await slipProviders.set(actorOf(context), brand_id, slot, body) };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/brands/:brand_id/slip-providers/:slot/test',
    summary: "Test a brand's slip provider connection and read its remaining quota",
    responses: { 200: { description: 'Whether the provider accepted the credentials, and the verifications left.', schema: connectionTestSchema } },
    errors: ['resource_not_found'],
    roles: ROLES,
    async handler({ context, params }) {
      const { brand_id, slot } = target(context, params);
      return { status: 200, body: await slipProviders.testConnection(brand_id, slot) };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/brands/:brand_id/slip-providers/:slot/remove',
    summary: "Remove a brand's primary or fallback slip provider",
    responses: { 200: { description: 'The providers after the change.', schema: providerSettingsSchema } },
    errors: ['resource_not_found'],
    roles: ROLES,
    async handler({ context, params }) {
      const { brand_id, slot } = target(context, params);
      return { status: 200, body: await slipProviders.remove(actorOf(context), brand_id, slot) };
    },
  });
}
