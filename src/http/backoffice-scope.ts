import { ApiError } from '../platform/errors.ts';
import type { Actor } from '../platform/access.ts';
import type { BackofficeContext } from './context.ts';

/**
 * Who a back-office request acts as, and on which brand: shared by every `/v1/bo/*` route so that
 * the brand scoping rule is written once. Another brand's ids answer 404 like unknown ones.
 */

export function actorOf(context: BackofficeContext): Actor {
  return { actor_type: 'backoffice_credential', actor_id: context.credential_id, request_id: context.request_id };
}

/** The brand a credential may act on: its own, or any for the platform administrator. */
export function scopeOf(context: BackofficeContext): string | null {
  return context.role === 'platform_admin' ? null : context.white_label_id;
}

export function requireOwnBrand(context: BackofficeContext, white_label_id: string): void {
  const scope = scopeOf(context);
  if (scope !== null && scope !== white_label_id) throw new ApiError('resource_not_found');
}

/**
 * The brand a request acts on: the one named, or the credential's own. A platform administrator must
 * name one; an operator naming another brand gets 404 like any id outside its scope.
 */
export function brandToActOn(context: BackofficeContext, requested: string | undefined): string {
  const brand = requested ?? context.white_label_id;
  if (!brand) throw new ApiError('validation_error', { details: { fields: [{ path: 'white_label_id', reason: 'required' }] } });
  requireOwnBrand(context, brand);
  return brand;
}
