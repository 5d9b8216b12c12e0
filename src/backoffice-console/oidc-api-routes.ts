import { z } from 'zod';
import type { RouteModule, RouteRegistrar } from '../http/context.ts';
import { actorOf, requireOwnBrand } from '../http/backoffice-scope.ts';
import { decodeCursor, encodeCursor, limitParameter } from '../http/paging.ts';
import { cursorListSchema, timestampSchema } from '../http/response-fields.ts';
import type { BackofficeRole } from '../platform/access.ts';
import { nameSchema, staffIdText } from '../tenancy/schemas.ts';
import type { ConsoleOidcSettings } from './oidc-settings.ts';

/**
 * A brand's OpenID Connect provider for the console and its staff list, in the back office:
 *
 * - GET  /v1/bo/brands/{brand_id}/console-oidc                the provider (never its client secret)
 * - POST /v1/bo/brands/{brand_id}/console-oidc                set or replace it
 * - POST /v1/bo/brands/{brand_id}/console-oidc/remove         remove it (sign-in through it stops)
 * - GET  /v1/bo/brands/{brand_id}/console-oidc/staff          the staff list, 50 to a page by default, with a cursor
 * - POST /v1/bo/brands/{brand_id}/console-oidc/staff          add or change an entry (subject, role, person)
 * - POST /v1/bo/brands/{brand_id}/console-oidc/staff/remove   remove an entry (its credential is revoked)
 *
 * The platform administrator manages every brand, the brand's operator (its administrator, as for the slip
 * providers) its own; a reviewer may not, not even read. Another brand's id answers 404.
 */

const ROLES: readonly BackofficeRole[] = ['platform_admin', 'operator'];
const STAFF_PAGE_DEFAULT = 50;
const STAFF_PAGE_MAXIMUM = 100;

export const providerBodySchema = z
  .object({
    issuer: z.string().min(8).max(500),
    client_id: z.string().min(1).max(255),
    client_secret: z.string().min(1).max(1000),
  })
  .strict();

const subjectSchema = z.string().min(1).max(255);

export const staffBodySchema = z
  .object({
    subject: subjectSchema,
    role: z.enum(['reviewer', 'operator']),
    name: nameSchema.optional(),
    staff_id: staffIdText.optional(),
  })
  .strict();

export const staffRemoveBodySchema = z.object({ subject: subjectSchema }).strict();

const staffQuerySchema = z.object({ limit: limitParameter(STAFF_PAGE_MAXIMUM).optional(), cursor: z.string().max(1000).optional() }).strict();
export const staffCursorSchema = z.object({ v: z.literal(1), white_label_id: z.string(), after: z.string() }).strict();

const providerSchema = z
  .object({
    object: z.literal('console_oidc_provider'),
    white_label_id: z.string(),
    configured: z.boolean(),
    issuer: z.string().nullable(),
    client_id: z.string().nullable(),
    client_secret_set: z.boolean().meta({ description: 'Whether a client secret is set; the secret itself is never returned.' }),
    redirect_uri: z.string().meta({ description: "The redirect URI to register at the provider for this client: {BACKOFFICE_BASE_URL}/bo/oidc/callback." }),
    updated_at: timestampSchema.nullable(),
  })
  .meta({ id: 'console_oidc_provider' });

const staffEntrySchema = z
  .object({
    object: z.literal('console_oidc_staff_entry'),
    white_label_id: z.string(),
    subject: z.string().meta({ description: "The provider's subject (the ID token's `sub`) this entry maps." }),
    role: z.enum(['reviewer', 'operator']),
    staff_id: z.string(),
    credential_id: z.string().meta({ description: 'The console credential a sign-in of this subject acts as.' }),
    created_at: timestampSchema,
    updated_at: timestampSchema,
  })
  .meta({ id: 'console_oidc_staff_entry' });

export function consoleOidcApiRoutes(services: { oidcSettings: ConsoleOidcSettings }): RouteModule {
  return (registrar) => {
    registerProviderRoutes(registrar, services.oidcSettings);
    registerStaffRoutes(registrar, services.oidcSettings);
  };
}

function brandOf(context: Parameters<typeof requireOwnBrand>[0], params: Record<string, string>): string {
  const brand_id = params.brand_id ?? '';
  requireOwnBrand(context, brand_id);
  return brand_id;
}

function registerProviderRoutes(registrar: RouteRegistrar, settings: ConsoleOidcSettings): void {
  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/brands/:brand_id/console-oidc',
    summary: "Read a brand's OpenID Connect provider for the back-office console",
    responses: { 200: { description: 'The provider, without its client secret.', schema: providerSchema } },
    errors: ['resource_not_found'],
    roles: ROLES,
    async handler({ context, params }) {
      return { status: 200, body: await settings.viewProvider(brandOf(context, params)) };
    },
  });
  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/brands/:brand_id/console-oidc',
    summary: "Set or replace a brand's OpenID Connect provider for the back-office console",
    responses: { 200: { description: 'The provider after the change; the client secret is sealed and never shown again.', schema: providerSchema } },
    errors: ['resource_not_found'],
    roles: ROLES,
    body: providerBodySchema,
    async handler({ context, params, body }) {
      return { status: 200, body: await settings.setProvider(actorOf(context), brandOf(context, params), body) };
    },
  });
  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/brands/:brand_id/console-oidc/remove',
    summary: "Remove a brand's OpenID Connect provider for the back-office console",
    responses: { 200: { description: 'The brand without a provider.', schema: providerSchema } },
    errors: ['resource_not_found'],
    roles: ROLES,
    async handler({ context, params }) {
      return { status: 200, body: await settings.removeProvider(actorOf(context), brandOf(context, params)) };
    },
  });
}

function registerStaffRoutes(registrar: RouteRegistrar, settings: ConsoleOidcSettings): void {
  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/brands/:brand_id/console-oidc/staff',
    summary: "List a brand's console staff list (OpenID subjects mapped to people and roles)",
    responses: { 200: { description: 'A page of the list in subject order.', schema: cursorListSchema(staffEntrySchema) } },
    errors: ['resource_not_found'],
    roles: ROLES,
    query: staffQuerySchema,
    async handler({ context, params, query }) {
      const brand = brandOf(context, params);
      // A cursor is bound to its brand: another brand's cursor is as invalid as a damaged one.
      const cursor = query.cursor === undefined ? null : decodeCursor(staffCursorSchema.refine((value) => value.white_label_id === brand), query.cursor);
      const limit = query.limit === undefined ? STAFF_PAGE_DEFAULT : Number(query.limit);
      const page = await settings.listStaff(brand, cursor?.after ?? null, limit);
      const next_cursor = page.has_more && page.last_subject !== null ? encodeCursor({ v: 1, white_label_id: brand, after: page.last_subject }) : null;
      return { status: 200, body: { object: 'list', data: page.data, has_more: next_cursor !== null, next_cursor } };
    },
  });
  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/brands/:brand_id/console-oidc/staff',
    summary: "Add or change an entry of a brand's console staff list",
    responses: { 200: { description: 'The entry after the change.', schema: staffEntrySchema } },
    errors: ['resource_not_found'],
    roles: ROLES,
    body: staffBodySchema,
    async handler({ context, params, body }) {
      return { status: 200, body: await settings.setStaff(actorOf(context), brandOf(context, params), body) };
    },
  });
  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/brands/:brand_id/console-oidc/staff/remove',
    summary: "Remove an entry of a brand's console staff list; its credential is revoked and its sessions end",
    responses: { 200: { description: 'The entry removed.', schema: staffEntrySchema } },
    errors: ['resource_not_found'],
    roles: ROLES,
    body: staffRemoveBodySchema,
    async handler({ context, params, body }) {
      return { status: 200, body: await settings.removeStaff(actorOf(context), brandOf(context, params), body.subject) };
    },
  });
}
