import { z } from 'zod';
import { decodeJson, isJsonMediaType } from '../http/json-body.ts';
import { ApiError } from '../platform/errors.ts';
import { parseTimestamp } from '../platform/time.ts';
import { accountOfContext, type RouteRegistrar, type RouteModule } from '../http/context.ts';
import { requestFingerprint } from '../platform/fingerprint.ts';
import { parseOrThrow, unstorableTextPaths } from '../http/validation.ts';
import { amountMinorSchema } from '../http/order-fields.ts';
import { evidenceShapeOf, parseEvidence, SLIP_BODY_LIMIT_BYTES } from './evidence-body.ts';
import type { SlipTokenClaims } from '../slip-capability/capability.ts';
import { findBank } from '../banks/service.ts';
import { slipJsonSchema, slipMultipartSchema, slipReceiptSchema } from './resources.ts';
import { openedClaimSchema } from '../deposits/resources.ts';
import type { Config } from '../platform/config.ts';
import type { Queryable } from '../platform/db.ts';
import type { SlipsService } from './service.ts';

/**
 * Slip intake at `slip_upload.upload_url` (POST /v1/pay/deposits/{id}/slip, the order's capability),
 * the late-slip claim at a 410's `claim_url` (POST /v1/pay/deposits/{id}/claims, the same capability),
 * and the merchant's read of the stored image (GET /v1/pay/deposits/{id}/slip, HMAC-signed).
 */

/** The sibling routes of the upload address name the same capability: the upload address of the order. */
function uploadAddressOf(request_address: string): string {
  return request_address.replace(/\/claims$/, '/slip');
}

/** What a payer can say about a transfer: here at `claim_url`, and through the back office's claim desk. */
export const transferReportFields = {
  trans_ref: z.string().regex(/^[A-Za-z0-9]{1,50}$/).optional(),
  sending_bank_code: z.string().regex(/^[0-9]{3}$/).optional(),
  occurred_at: z
    .string()
    .max(40)
    .refine((text) => parseTimestamp(text) !== null, { params: { reason: 'invalid_timestamp' } })
    .optional(),
  note: z.string().trim().min(1).max(1000).optional(),
};

/** A late-slip claim: what the payer can say about the transfer that came too late. */
const lateSlipClaimSchema = z
  .object({ ...transferReportFields, amount_minor: amountMinorSchema.optional() })
  .strict()
  .refine((body) => body.trans_ref !== undefined || body.note !== undefined, {
    params: { reason: 'required', hint: 'trans_ref or a note about the transfer' },
    path: ['note'],
  });

/** What the slip intake routes call. */
export interface SlipRouteDependencies {
  config: Config;
  /** Reads outside a request transaction. */
  database: Queryable;
  slips: SlipsService;
}

/** The slip intake routes, on the services they call. */
export function slipRoutes(services: SlipRouteDependencies): RouteModule {
  return (registrar) => registerSlipRoutes(registrar, services);
}

function registerSlipRoutes(registrar: RouteRegistrar, services: SlipRouteDependencies): void {
  registrar.capability<SlipTokenClaims>({
    method: 'POST',
    url: '/v1/pay/deposits/:id/slip',
    summary: 'Upload a slip',
    responses: { 202: { description: 'The evidence is durably stored; the outcome comes later.', schema: slipReceiptSchema, cache_control: 'no-store' } },
    errors: ['late_slip_window_closed', 'slip_limit_reached', 'slip_intake_unavailable', 'idempotency_key_reused', 'idempotency_in_flight', 'unsupported_media_type', 'malformed_json', 'deposit_state_conflict'],
    documented_content: { 'multipart/form-data': slipMultipartSchema, 'application/json': slipJsonSchema },
    body_limit_bytes: SLIP_BODY_LIMIT_BYTES,
    body_deadline_ms: services.config.slip_intake.body_deadline_ms,
    capability_address: (address) => address,
    async handler({ context, body, content_type }) {
      evidenceShapeOf(content_type);
      // The body is read only inside a slot of the process's slip intake, so that the images held in
      // memory at once stay bounded; uploads beyond the slots queue before a byte of theirs is read.
      const answer = await services.slips.withIntakeSlot(async () => {
        const evidence = await parseEvidence(content_type, body);
        if (evidence.shape === 'reference' && !(await findBank(services.database, evidence.sending_bank_code))) {
          throw new ApiError('validation_error', { details: { fields: [{ path: 'sending_bank_code', reason: 'unknown_bank', hint: 'a three-digit code from GET /v1/pay/banks' }] } });
        }
        return services.slips.upload({
          claims: context.claims,
          idempotency_key: context.idempotency_key,
          request_id: context.request_id,
          path: context.path,
          evidence,
        });
      });
      return {
        status: 202,
        body: answer.receipt,
        headers: { 'Cache-Control': 'no-store', ...(answer.replayed ? { 'Idempotent-Replay': 'true' } : {}) },
      };
    },
  });

  registrar.capability<SlipTokenClaims>({
    method: 'POST',
    url: '/v1/pay/deposits/:id/claims',
    summary: 'Report a transfer after the late-slip window',
    responses: { 201: { description: 'The claim opened for the late transfer.', schema: openedClaimSchema } },
    // The claim's body is buffered within the process's budget (503 when it is spent); the slip's is streamed.
    errors: ['late_slip_window_open', 'idempotency_key_reused', 'idempotency_in_flight', 'unsupported_media_type', 'malformed_json', 'deposit_state_conflict', 'service_unavailable'],
    documented_content: { 'application/json': lateSlipClaimSchema },
    body_limit_bytes: 16 * 1024,
    body_deadline_ms: services.config.http.body_deadline_ms,
    capability_address: uploadAddressOf,
    async handler({ context, body, content_type }) {
      if (!isJsonMediaType(content_type)) throw new ApiError('unsupported_media_type');
      const decoded = decodeJson(await body.buffer());
      const unstorable = unstorableTextPaths(decoded);
      if (unstorable.length > 0) throw new ApiError('validation_error', { details: { fields: unstorable } });
      const evidence = parseOrThrow(lateSlipClaimSchema, decoded);
      const opened = await services.slips.openClaim({
        claims: context.claims,
        idempotency_key: context.idempotency_key,
        request_id: context.request_id,
        fingerprint: requestFingerprint('POST', context.path, decoded),
        evidence: Object.fromEntries(Object.entries(evidence).filter(([, value]) => value !== undefined)),
      });
      const headers: Record<string, string> = opened.replayed ? { 'Idempotent-Replay': 'true' } : {};
      return { status: 201, body: opened.claim, headers };
    },
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/deposits/:id/slip',
    summary: "Read a deposit's slip image",
    responses: { 200: { description: 'The stored slip image.', binary: ['image/jpeg', 'image/png', 'image/webp'], cache_control: 'no-store' } },
    // 410 once the evidence retention deleted the image (docs/decisions/slips.md, "Evidence retention").
    errors: ['slip_evidence_purged'],
    scope: 'pay:read',
    query: z.object({ receipt_id: z.string().min(1).max(100).optional() }).strict(),
    async handler({ context, db, params, query }) {
      const image = await services.slips.imageFor(db, accountOfContext(context), params.id ?? '', query.receipt_id ?? null);
      if (!image) throw new ApiError('resource_not_found');
      return {
        status: 200,
        body: null,
        binary: { content_type: image.media_type, bytes: image.bytes },
        headers: {
          'Cache-Control': 'no-store',
          'X-Content-Type-Options': 'nosniff',
          'Content-Disposition': `inline; filename="${image.receipt_id}.${image.media_type.slice('image/'.length)}"`,
          'Slip-Receipt-Id': image.receipt_id,
        },
      };
    },
  });
}
