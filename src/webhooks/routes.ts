import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { invariant } from '../platform/assert.ts';
import { HOUR_MS, parseTimestamp } from '../platform/time.ts';
import type { RouteRegistrar } from '../http/context.ts';
import { actorOf, brandToActOn, scopeOf } from '../http/backoffice-scope.ts';
import { idText } from '../tenancy/schemas.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { CreateEndpointInput, UpdateEndpointInput, WebhookService } from './service.ts';
import type { SigningKeyService } from './signing-keys.ts';
import { isWebhookId } from './types.ts';
import { deletedWebhookEndpointSchema, keyRotationSchema, signingKeyListSchema, webhookDeliveryListSchema, webhookDeliverySchema, webhookEndpointListSchema, webhookEndpointSchema, webhookReplaySchema } from './resources.ts';

/**
 * Routes of the webhooks module, thin over WebhookService and SigningKeyService.
 *
 * Public: GET /v1/webhooks/signing-keys. Back office (`/v1/bo/*`): endpoints (create, list, read,
 * update, delete) for the platform administrator and the brand's operators, read by reviewers too;
 * deliveries with their attempts; resend and replay (operators and reviewers, the people who answer a
 * merchant's "we missed an event"); signing key rotation (platform administrator only).
 */

const MAX_PAGE = 100;
const modeSchema = z.enum(['test', 'live']);
/** Event type names are namespaced lowercase words, such as deposit.settled. */
const eventTypeSchema = z
  .string()
  .max(100)
  .refine((text) => /^[a-z0-9_]+(\.[a-z0-9_]+)+$/.test(text), { params: { reason: 'invalid_event_type', hint: 'such as deposit.settled' } });
const eventTypesSchema = z.array(eventTypeSchema).min(1).max(100);
const urlSchema = z.string().min(1).max(2048);
const descriptionSchema = z.string().trim().max(500);
const limitSchema = z
  .string()
  .refine((text) => /^[0-9]{1,3}$/.test(text) && Number(text) >= 1 && Number(text) <= MAX_PAGE, {
    params: { reason: 'out_of_range', hint: `1 to ${MAX_PAGE}` },
  })
  .optional();
const timestampSchema = z.string().max(40).refine((text) => parseTimestamp(text) !== null, { params: { reason: 'invalid_timestamp' } });

/**
 * The endpoint's address: `deposit_url`, the spec's name ("The merchant's webhook receiving address is registered in
 * the brand dashboard as `deposit_url`"), or `url`, the name this API had before issue 31, still accepted; given
 * both, they must be the same address.
 */
const addressFields = {
  deposit_url: urlSchema.optional().meta({ description: 'The merchant\'s webhook receiving address (the spec\'s name).' }),
  url: urlSchema.optional().meta({ description: 'The same address under its earlier name; `deposit_url` is preferred.' }),
};

function checkAddress(body: { deposit_url?: string | undefined; url?: string | undefined }, context: z.RefinementCtx, required: boolean): void {
  if (body.deposit_url !== undefined && body.url !== undefined && body.deposit_url !== body.url) {
    context.addIssue({ code: 'custom', path: ['deposit_url'], params: { reason: 'conflicts_with_url', hint: 'send deposit_url alone' }, message: 'two addresses' });
  }
  if (required && body.deposit_url === undefined && body.url === undefined) {
    context.addIssue({ code: 'custom', path: ['deposit_url'], params: { reason: 'required' }, message: 'required' });
  }
}

/** The address a checked body names, and the field it came in (for the errors of its checks). */
function endpointAddressOf(body: { deposit_url?: string | undefined; url?: string | undefined }): { url: string; address_field: 'deposit_url' | 'url' } | null {
  if (body.deposit_url !== undefined) return { url: body.deposit_url, address_field: 'deposit_url' };
  if (body.url !== undefined) return { url: body.url, address_field: 'url' };
  return null;
}

/** The service's input of a checked creation body (the route's and the CLI's direct backend's). */
export function endpointCreationOf(body: z.infer<typeof createEndpointBody>): CreateEndpointInput {
  const { deposit_url: _depositUrl, url: _url, mode, ...rest } = body;
  const address = endpointAddressOf(body);
  invariant(address !== null, 'a created endpoint has an address (createEndpointBody)');
  return { ...rest, ...address, livemode: mode === 'live' };
}

/** The service's input of a checked update body: the address under the name it came in, the rest as given. */
export function endpointUpdateOf(body: z.infer<typeof updateEndpointBody>): UpdateEndpointInput {
  const { deposit_url: _depositUrl, url: _url, ...rest } = body;
  return { ...rest, ...(endpointAddressOf(body) ?? {}) };
}

/** Bodies of the write routes, shared with the CLI's direct backend so both refuse the same input. */
export const createEndpointBody = z
  .object({
    merchant_id: idText,
    mode: modeSchema,
    ...addressFields,
    event_types: eventTypesSchema.nullable().optional(),
    description: descriptionSchema.optional(),
    enabled: z.boolean().optional(),
  })
  .strict()
  .superRefine((body, context) => checkAddress(body, context, true));

export const updateEndpointBody = z
  .object({
    ...addressFields,
    enabled: z.boolean().optional(),
    event_types: eventTypesSchema.nullable().optional(),
    description: descriptionSchema.nullable().optional(),
  })
  .strict()
  .superRefine((body, context) => checkAddress(body, context, false))
  .refine((body) => Object.values(body).some((value) => value !== undefined), { params: { reason: 'nothing_to_update' } });

const listQuery = z
  .object({
    merchant_id: idText.optional(),
    white_label_id: idText.optional(),
    mode: modeSchema.optional(),
    limit: limitSchema,
    starting_after: idText.optional(),
  })
  .strict();

const deliveriesQuery = z
  .object({
    status: z.enum(['pending', 'succeeded', 'failed']).optional(),
    event_id: idText.optional(),
    limit: limitSchema,
    starting_after: idText.optional(),
  })
  .strict();

export const replayBody = z
  .object({
    event_types: eventTypesSchema.nullable().optional(),
    created_after: timestampSchema.optional(),
    created_before: timestampSchema.optional(),
    only_failed: z.boolean().optional(),
  })
  .strict();

const rotateBody = z.object({ overlap_hours: z.number().int().min(1).max(720).optional() }).strict();

const EDITORS = ['platform_admin', 'operator'] as const;
const READERS = ['platform_admin', 'operator', 'reviewer'] as const;

/** An id that is not even shaped like one of ours names nothing: 404 without a query. */
function endpointIdOf(params: Record<string, string>): string {
  const id = params.endpoint_id ?? '';
  if (!isWebhookId(id, 'endpoint')) throw new ApiError('resource_not_found');
  return id;
}

function deliveryIdOf(params: Record<string, string>): string {
  const id = params.delivery_id ?? '';
  if (!isWebhookId(id, 'delivery')) throw new ApiError('resource_not_found');
  return id;
}

/** What the routes call; resolved per request, so that the module is built on first use. */
export interface WebhookRouteTargets {
  service: WebhookService;
  signingKeys: SigningKeyService;
}

export function registerWebhookRoutesWith(registrar: RouteRegistrar, targets: () => WebhookRouteTargets, tenancy: TenancyService): void {
  const lazy = <Key extends keyof WebhookRouteTargets>(key: Key) => () => targets()[key];
  const webhookService = lazy('service');
  const keys = lazy('signingKeys');

  registrar.public({
    method: 'GET',
    url: '/v1/webhooks/signing-keys',
    summary: 'Webhook signing keys',
    responses: { 200: { description: 'The published webhook signing keys.', schema: signingKeyListSchema, cache_control: 'public, max-age=10' } },
    async handler() {
      // A short shared cache: a rotation publishes the new key 30 seconds before it signs, so a copy
      // at most 10 seconds old always holds the key of any signature a receiver can see.
      return { status: 200, body: { keys: await keys().listPublished() }, headers: { 'Cache-Control': 'public, max-age=10' } };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/webhooks',
    summary: 'Create a webhook endpoint',
    responses: { 201: { description: 'The new endpoint.', schema: webhookEndpointSchema } },
    errors: ['resource_not_found'],
    roles: EDITORS,
    body: createEndpointBody,
    async handler({ context, body }) {
      const endpoint = await webhookService().createEndpoint(actorOf(context), scopeOf(context), endpointCreationOf(body));
      return { status: 201, body: endpoint };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/webhooks',
    summary: 'List webhook endpoints',
    responses: { 200: { description: 'A page of endpoints.', schema: webhookEndpointListSchema } },
    errors: ['resource_not_found'],
    roles: READERS,
    query: listQuery,
    async handler({ context, query }) {
      let white_label_id: string;
      if (query.merchant_id !== undefined) {
        const merchant = await tenancy.getMerchant(query.merchant_id, scopeOf(context));
        if (!merchant) throw new ApiError('resource_not_found', { details: { field: 'merchant_id' } });
        white_label_id = brandToActOn(context, query.white_label_id ?? merchant.white_label_id);
        if (white_label_id !== merchant.white_label_id) throw new ApiError('resource_not_found', { details: { field: 'merchant_id' } });
      } else {
        white_label_id = brandToActOn(context, query.white_label_id);
      }
      const page = await webhookService().listEndpoints({
        white_label_id,
        merchant_id: query.merchant_id ?? null,
        livemode: query.mode === undefined ? null : query.mode === 'live',
        starting_after: query.starting_after ?? null,
        limit: query.limit === undefined ? MAX_PAGE : Number(query.limit),
      });
      return { status: 200, body: { object: 'list', ...page } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/webhooks/:endpoint_id',
    summary: 'Read a webhook endpoint',
    responses: { 200: { description: 'The endpoint.', schema: webhookEndpointSchema } },
    roles: READERS,
    async handler({ context, params }) {
      return { status: 200, body: await webhookService().getEndpoint(scopeOf(context), endpointIdOf(params)) };
    },
  });

  registrar.backoffice({
    method: 'PATCH',
    url: '/v1/bo/webhooks/:endpoint_id',
    summary: 'Update a webhook endpoint',
    responses: { 200: { description: 'The endpoint after the change.', schema: webhookEndpointSchema } },
    roles: EDITORS,
    body: updateEndpointBody,
    async handler({ context, params, body }) {
      return { status: 200, body: await webhookService().updateEndpoint(actorOf(context), scopeOf(context), endpointIdOf(params), endpointUpdateOf(body)) };
    },
  });

  registrar.backoffice({
    method: 'DELETE',
    url: '/v1/bo/webhooks/:endpoint_id',
    summary: 'Delete a webhook endpoint',
    responses: { 200: { description: 'The endpoint is deleted.', schema: deletedWebhookEndpointSchema } },
    roles: EDITORS,
    async handler({ context, params }) {
      return { status: 200, body: await webhookService().deleteEndpoint(actorOf(context), scopeOf(context), endpointIdOf(params)) };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/webhooks/:endpoint_id/deliveries',
    summary: 'List deliveries',
    responses: { 200: { description: 'A page of deliveries.', schema: webhookDeliveryListSchema } },
    roles: READERS,
    query: deliveriesQuery,
    async handler({ context, params, query }) {
      const page = await webhookService().listDeliveries(scopeOf(context), endpointIdOf(params), {
        status: query.status ?? null,
        event_id: query.event_id ?? null,
        starting_after: query.starting_after ?? null,
        limit: query.limit === undefined ? MAX_PAGE : Number(query.limit),
      });
      return { status: 200, body: { object: 'list', ...page } };
    },
  });

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/webhooks/:endpoint_id/deliveries/:delivery_id',
    summary: 'Read a delivery',
    responses: { 200: { description: 'The delivery with its attempts.', schema: webhookDeliverySchema } },
    roles: READERS,
    async handler({ context, params }) {
      return { status: 200, body: await webhookService().getDelivery(scopeOf(context), endpointIdOf(params), deliveryIdOf(params)) };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/webhooks/:endpoint_id/deliveries/:delivery_id/resend',
    summary: 'Resend a delivery',
    responses: { 202: { description: 'The delivery, armed to be sent again.', schema: webhookDeliverySchema } },
    errors: ['webhook_endpoint_disabled'],
    roles: READERS,
    async handler({ context, params }) {
      const endpoint_id = endpointIdOf(params);
      const delivery_id = deliveryIdOf(params);
      return { status: 202, body: await webhookService().resendDelivery(actorOf(context), scopeOf(context), endpoint_id, delivery_id) };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/webhooks/:endpoint_id/replay',
    summary: 'Replay deliveries',
    responses: { 202: { description: 'What the replay armed and created.', schema: webhookReplaySchema } },
    errors: ['webhook_endpoint_disabled'],
    roles: READERS,
    body: replayBody,
    async handler({ context, params, body }) {
      const result = await webhookService().replay(actorOf(context), scopeOf(context), endpointIdOf(params), {
        event_types: body.event_types,
        created_after: body.created_after === undefined ? undefined : (parseTimestamp(body.created_after) ?? undefined),
        created_before: body.created_before === undefined ? undefined : (parseTimestamp(body.created_before) ?? undefined),
        only_failed: body.only_failed,
      });
      return { status: 202, body: result };
    },
  });

  // The live key set's door, with no environment selector: a brand's sandbox set is rotated only by the
  // 114.00 THB sandbox scenario (SigningKeyService.rotateForSandboxScenario).
  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/webhook-signing-keys/rotate',
    summary: 'Rotate the live webhook signing key',
    responses: { 200: { description: 'The rotation.', schema: keyRotationSchema } },
    roles: ['platform_admin'],
    body: rotateBody,
    async handler({ context, body }) {
      const overlap_ms = body.overlap_hours === undefined ? undefined : body.overlap_hours * HOUR_MS;
      return { status: 200, body: await keys().rotate(actorOf(context), { overlap_ms }) };
    },
  });
}
