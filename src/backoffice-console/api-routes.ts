import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import type { Queryable } from '../platform/db.ts';
import type { RouteModule } from '../http/context.ts';
import { actorOf, brandToActOn } from '../http/backoffice-scope.ts';
import { timestampSchema } from '../http/response-fields.ts';
import { idText, nameSchema, staffIdText } from '../tenancy/schemas.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { ConsoleSessions } from './sessions.ts';

/**
 * POST /v1/bo/console/sign-in-links (platform administrator, operator): a one-time link to the back-office
 * console, what `npm run cli -- bo login` prints. Without `role`, the link signs in as the calling credential
 * itself (the first administrator's way in). With `role`, a new credential of that role is issued in the brand,
 * to the person named by `staff_id` or to a new person named `name`, exactly as POST /v1/bo/credentials would
 * (same roles, same audit rows), and the link signs in as it; that credential's bearer token is never shown, so
 * the person works only through the console, and revoking the credential ends their sessions.
 */

const bodySchema = z
  .object({
    white_label_id: idText.optional(),
    role: z.enum(['operator', 'reviewer']).optional(),
    name: nameSchema.optional(),
    staff_id: staffIdText.optional(),
  })
  .strict();

const signInLinkSchema = z
  .object({
    object: z.literal('console_sign_in_link'),
    url: z.string().meta({ description: 'The one-time sign-in link: single use, valid for 10 minutes. A secret: never log or forward it.' }),
    expires_at: timestampSchema,
    white_label_id: z.string(),
    credential_id: z.string(),
    staff_id: z.string(),
    role: z.enum(['platform_admin', 'operator', 'reviewer']),
  })
  .meta({ id: 'console_sign_in_link' });

export interface ConsoleApiDependencies {
  database: Queryable;
  sessions: ConsoleSessions;
  tenancy: TenancyService;
}

export function consoleApiRoutes(services: ConsoleApiDependencies): RouteModule {
  return (registrar) => {
    registrar.backoffice({
      method: 'POST',
      url: '/v1/bo/console/sign-in-links',
      summary: 'Make a one-time sign-in link to the back-office console',
      responses: { 201: { description: 'The link, shown this once.', schema: signInLinkSchema, cache_control: 'no-store' } },
      errors: ['resource_not_found'],
      roles: ['platform_admin', 'operator'],
      body: bodySchema,
      async handler({ context, body }) {
        const brand = brandToActOn(context, body.white_label_id);
        if (body.role === undefined && (body.name !== undefined || body.staff_id !== undefined)) {
          throw new ApiError('validation_error', { details: { fields: [{ path: 'role', reason: 'required', hint: 'name and staff_id name the holder of a new credential' }] } });
        }
        const credential_id =
          body.role === undefined
            ? context.credential_id
            : (await services.tenancy.createBackofficeCredential(actorOf(context), { white_label_id: brand, role: body.role, name: body.name ?? `Console ${body.role}`, staff_id: body.staff_id })).id;
        const holder = await services.tenancy.activeCredentialForSession(services.database, credential_id, brand);
        if (!holder) throw new ApiError('resource_not_found');
        const link = await services.sessions.issueSignInLink(actorOf(context), { white_label_id: brand, credential_id });
        return {
          status: 201,
          body: { object: 'console_sign_in_link', url: link.url, expires_at: link.expires_at, white_label_id: brand, credential_id, staff_id: holder.staff_id, role: holder.role },
          headers: { 'Cache-Control': 'no-store' },
        };
      },
    });
  };
}
