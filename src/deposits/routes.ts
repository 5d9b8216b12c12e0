import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { accountOfContext, type RouteOutcome, type RouteRegistrar, type RouteModule } from '../http/context.ts';
import { creationBuckets } from '../http/rate-limit.ts';
import { decodeCursor, encodeCursor, limitParameter, timestampParameter } from '../http/paging.ts';
import { amountMinorSchema, clientSchema, currencySchema, endUserRefSchema, merchantReferenceSchema, metadataSchema } from '../http/order-fields.ts';
import { beneficiaryAccountFields } from '../beneficiaries/routes.ts';
import { parseTimestamp } from '../platform/time.ts';
import { DEPOSIT_STATUSES } from './types.ts';
import { actorOf, brandToActOn } from '../http/backoffice-scope.ts';
import { idText } from '../tenancy/schemas.ts';
import type { DepositService } from './service.ts';
import { maskAccount } from './masking.ts';
import { DEFAULT_DEPOSIT_POLICY, type DepositPolicy, type DepositPolicyService } from './policy.ts';
import { createdDepositSchema, depositListSchema, depositOrderSchema, depositPolicySchema as depositPolicyResponseSchema, senderListSchema, waitingDepositSchema } from './resources.ts';
import { slipUploadSchema } from '../slip-capability/resources.ts';
import type { Queryable } from '../platform/db.ts';
import { mapPlannedCommand } from '../platform/read-part.ts';
import type { TenancyService } from '../tenancy/service.ts';

/**
 * POST /v1/pay/deposits (201 matched, 202 waiting for liquidity), GET /v1/pay/deposits/:id and
 * POST /v1/pay/deposits/:id/cancel. The business rules live in the service; the schema here checks
 * shapes only, so that each refusal carries the spec's code.
 */

const senderSchema = z
  .object({
    bank_code: beneficiaryAccountFields.bank_code,
    account_number: beneficiaryAccountFields.account_number,
    account_name_th: beneficiaryAccountFields.account_name_th,
    account_name_en: z.string().trim().min(1).max(100).optional(),
  })
  .strict();

export const createDepositSchema = z
  .object({
    amount_minor: amountMinorSchema,
    currency: currencySchema,
    merchant_reference: merchantReferenceSchema,
    end_user_ref: endUserRefSchema,
    sender: senderSchema.optional(),
    sender_id: z.string().min(1).max(100).optional(),
    client: clientSchema.optional(),
    fill_preference: z.enum(['any', 'internal_only']).optional(),
    min_ttl_seconds: z.number().int().min(0).max(86_400).optional(),
    expires_in_seconds: z.number().int().min(60).max(86_400).optional(),
    return_url: z
      .string()
      .max(2000)
      .refine((text) => URL.canParse(text) && ['https:', 'http:'].includes(new URL(text).protocol), { params: { reason: 'invalid_format', hint: 'an absolute http(s) URL' } })
      .optional(),
    metadata: metadataSchema.optional(),
  })
  .strict();

const LIST_MAX_LIMIT = 100;
const LIST_DEFAULT_LIMIT = 20;

const listQuerySchema = z
  .object({
    status: z.enum(DEPOSIT_STATUSES).optional(),
    end_user_ref: z.string().min(1).max(64).optional(),
    from: timestampParameter.optional(),
    to: timestampParameter.optional(),
    order: z.enum(['asc', 'desc']).optional(),
    limit: limitParameter(LIST_MAX_LIMIT).optional(),
    cursor: z.string().min(1).max(1000).optional(),
  })
  .strict();

/** The filters a list cursor is bound to: changing any of them mid-cursor is cursor_filter_mismatch. */
const cursorSchema = z
  .object({
    v: z.literal(1),
    created_at: z.number().int().min(0).max(253_402_300_799_999),
    id: z.string().min(1).max(100),
    filters: z.object({ status: z.string().nullable(), end_user_ref: z.string().nullable(), from: z.string().nullable(), to: z.string().nullable(), order: z.enum(['asc', 'desc']) }),
  })
  .strict();
type ListCursor = z.infer<typeof cursorSchema>;

function decodeListCursor(text: string): ListCursor {
  return decodeCursor(cursorSchema, text);
}

const modeSchema = z.enum(['test', 'live']);

/** The policy as the back office shows it: the gateway account masked. */
function policyView(white_label_id: string, mode: 'test' | 'live', policy: DepositPolicy & { source: string }) {
  const { gateway, ...terms } = policy;
  return {
    object: 'deposit_policy',
    white_label_id,
    mode,
    ...terms,
    gateway: gateway ? { bank_code: gateway.bank_code, account_number_masked: maskAccount(gateway.account_last4), account_name_th: gateway.account_name_th } : null,
  };
}

const depositPolicySchema = z
  .object({
    white_label_id: idText.optional(),
    mode: modeSchema,
    min_amount_minor: amountMinorSchema,
    max_amount_minor: amountMinorSchema,
    default_expires_in_seconds: z.number().int().min(60).max(86_400),
    max_expires_in_seconds: z.number().int().min(60).max(86_400),
    max_legs: z.number().int().min(1).max(10),
    liquidity_wait_seconds: z.number().int().min(10).max(3600),
    /** Reviews of orders at or above this amount need two approvers; null: never; omitted: the default. */
    four_eyes_min_amount_minor: amountMinorSchema.nullable().optional(),
    /** Whether orders show each leg's `qr_payload`; omitted: the default (shown). */
    qr_payload_enabled: z.boolean().optional(),
    /** Orders at or above this amount are held for review (POLICY_HOLD); null or omitted: no hold. */
    policy_hold_min_amount_minor: amountMinorSchema.nullable().optional(),
    gateway: z
      .object({ bank_code: beneficiaryAccountFields.bank_code, account_number: beneficiaryAccountFields.account_number, account_name_th: beneficiaryAccountFields.account_name_th })
      .strict()
      .nullable(),
  })
  .strict()
  .superRefine((body, context) => {
    for (const field of ['min_amount_minor', 'max_amount_minor', 'policy_hold_min_amount_minor'] as const) {
      const value = body[field];
      if (typeof value === 'number' && value % 100 !== 0) context.addIssue({ code: 'custom', path: [field], params: { reason: 'must_be_whole_baht' }, message: 'whole baht' });
    }
    if (body.min_amount_minor > body.max_amount_minor) context.addIssue({ code: 'custom', path: ['min_amount_minor'], params: { reason: 'too_large', hint: 'at most max_amount_minor' }, message: 'range' });
    if (body.default_expires_in_seconds > body.max_expires_in_seconds) {
      context.addIssue({ code: 'custom', path: ['default_expires_in_seconds'], params: { reason: 'too_large', hint: 'at most max_expires_in_seconds' }, message: 'range' });
    }
  });

/** What the deposit routes call. */
export interface DepositRouteDependencies {
  /** Reads outside a request transaction. */
  database: Queryable;
  depositPolicies: DepositPolicyService;
  deposits: DepositService;
  tenancy: TenancyService;
}

/** The deposit routes, on the services they call. */
export function depositRoutes(services: DepositRouteDependencies): RouteModule {
  return (registrar) => registerDepositRoutes(registrar, services);
}

function registerDepositRoutes(registrar: RouteRegistrar, services: DepositRouteDependencies): void {
  const deposits = services.deposits;

  registrar.backoffice({
    method: 'GET',
    url: '/v1/bo/deposit-policy',
    summary: 'Read the deposit policy',
    responses: { 200: { description: "The brand's deposit policy.", schema: depositPolicyResponseSchema } },
    errors: ['resource_not_found'],
    roles: ['platform_admin', 'operator', 'reviewer'],
    query: z.object({ mode: modeSchema, white_label_id: idText.optional() }).strict(),
    async handler({ context, query }) {
      const brand = brandToActOn(context, query.white_label_id);
      if (!(await services.tenancy.getBrand(brand))) throw new ApiError('resource_not_found');
      const policy = await services.depositPolicies.policyFor(services.database, brand, query.mode === 'live');
      return { status: 200, body: policyView(brand, query.mode, policy) };
    },
  });

  registrar.backoffice({
    method: 'POST',
    url: '/v1/bo/deposit-policy',
    summary: 'Set the deposit policy',
    responses: { 200: { description: 'The policy as stored.', schema: depositPolicyResponseSchema } },
    errors: ['resource_not_found'],
    roles: ['platform_admin', 'operator'],
    body: depositPolicySchema,
    async handler({ context, body }) {
      const brand = brandToActOn(context, body.white_label_id);
      if (!(await services.tenancy.getBrand(brand))) throw new ApiError('resource_not_found');
      const { white_label_id: _ignored, mode, gateway, four_eyes_min_amount_minor, qr_payload_enabled, policy_hold_min_amount_minor, ...rest } = body;
      const terms = {
        ...rest,
        four_eyes_min_amount_minor: four_eyes_min_amount_minor === undefined ? DEFAULT_DEPOSIT_POLICY.four_eyes_min_amount_minor : four_eyes_min_amount_minor,
        qr_payload_enabled: qr_payload_enabled ?? DEFAULT_DEPOSIT_POLICY.qr_payload_enabled,
        policy_hold_min_amount_minor: policy_hold_min_amount_minor ?? DEFAULT_DEPOSIT_POLICY.policy_hold_min_amount_minor,
      };
      const policy = await services.depositPolicies.setPolicyByStaff(actorOf(context), brand, mode, terms, gateway ?? null);
      return { status: 200, body: policyView(brand, mode, policy) };
    },
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/deposits',
    summary: 'List deposits',
    responses: { 200: { description: 'A page of deposit orders.', schema: depositListSchema } },
    errors: ['cursor_filter_mismatch'],
    scope: 'pay:read',
    query: listQuerySchema,
    async handler({ context, db, query }) {
      const account = accountOfContext(context);
      const filters: ListCursor['filters'] = {
        status: query.status ?? null,
        end_user_ref: query.end_user_ref ?? null,
        from: query.from ?? null,
        to: query.to ?? null,
        order: query.order ?? 'desc',
      };
      let after: { created_at: Date; deposit_id: string } | null = null;
      if (query.cursor !== undefined) {
        const cursor = decodeListCursor(query.cursor);
        if (JSON.stringify(cursor.filters) !== JSON.stringify(filters)) throw new ApiError('cursor_filter_mismatch');
        after = { created_at: new Date(cursor.created_at), deposit_id: cursor.id };
      }
      const limit = query.limit === undefined ? LIST_DEFAULT_LIMIT : Number(query.limit);
      const { views } = await deposits.list(db, account, {
        status: query.status ?? null,
        end_user_ref: filters.end_user_ref,
        created_from: filters.from ? parseTimestamp(filters.from) : null,
        created_to: filters.to ? parseTimestamp(filters.to) : null,
        descending: filters.order === 'desc',
        after,
        limit: limit + 1,
      });
      const page = views.slice(0, limit);
      const last = page.at(-1);
      const nextCursor =
        views.length > limit && last
          ? encodeCursor({ v: 1, created_at: Date.parse(last.created_at), id: last.id, filters } satisfies ListCursor)
          : null;
      return { status: 200, body: { object: 'list', data: page, has_more: nextCursor !== null, next_cursor: nextCursor } };
    },
  });

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/deposits',
    summary: 'Create a deposit',
    responses: { 201: { description: 'Matched at once: `awaiting_payment` with `legs[]` and `slip_upload`.', schema: createdDepositSchema, cache_control: 'no-store' }, 202: { description: 'Waiting for liquidity: `awaiting_liquidity`, empty `legs`, `liquidity{}` and `retry_after_seconds`.', schema: waitingDepositSchema } },
    errors: ['amount_not_supported', 'sender_required', 'duplicate_open_deposit', 'too_many_open_deposits', 'sender_bank_unavailable', 'merchant_reference_in_use', 'resource_not_found', 'deposit_state_conflict', 'withdrawal_state_conflict', 'alloc_state_conflict', 'route_unavailable'],
    // Shed first when the service is overloaded (spec, Errors, rule 2): 503 route_unavailable.
    load_class: 'new_deposit',
    scope: 'pay:write',
    body: createDepositSchema,
    extraBuckets: (body, context) => creationBuckets(body, context),
    // The end user's lock and the brand's policy, the creation's first step, ride on the idempotency statement.
    command: ({ context, body }) =>
      mapPlannedCommand(deposits.planCreation(accountOfContext(context), body, context.cause), (created): RouteOutcome => {
        if (created.matched) return { status: 201, body: { ...created.deposit, slip_upload: created.slip_upload }, headers: { 'Cache-Control': 'no-store' } };
        // Retry-After says what the body's `retry_after_seconds` says: the lower bound for polling (spec, 55 and 295).
        return { status: 202, body: { ...created.deposit, retry_after_seconds: created.retry_after_seconds }, headers: { 'Retry-After': String(created.retry_after_seconds) } };
      }),
  });

  // The QR image of a leg, for the end user's browser: no merchant credentials, a signed link instead.
  registrar.public({
    method: 'GET',
    url: '/v1/pay/deposits/:id/legs/:leg_ref/qr.png',
    summary: "A leg's QR image (signed link)",
    responses: { 200: { description: "The leg's PromptPay QR image.", binary: ['image/png'], cache_control: 'private, no-store' } },
    query: z
      .object({
        wl: z.string().min(1).max(100),
        expires: z.string().regex(/^[0-9]{1,12}$/),
        signature: z.string().min(1).max(100),
      })
      .strict(),
    link_subject: ({ query, params }) =>
      deposits.verifyQrLink({ white_label_id: query.wl, deposit_id: params.id ?? '', leg_ref: params.leg_ref ?? '', expires: query.expires, signature: query.signature })
        ? { white_label_id: query.wl, subject: `${params.id}:${params.leg_ref}` }
        : null,
    async handler({ query, params }) {
      const png = await deposits.qrImage(services.database, {
        white_label_id: query.wl,
        deposit_id: params.id ?? '',
        leg_ref: params.leg_ref ?? '',
        expires: query.expires,
        signature: query.signature,
      });
      if (!png) throw new ApiError('resource_not_found');
      return { status: 200, body: null, binary: { content_type: 'image/png', bytes: png }, headers: { 'Cache-Control': 'private, no-store' } };
    },
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/senders',
    summary: 'List registered senders',
    responses: { 200: { description: "The end user's verified sender accounts.", schema: senderListSchema } },
    scope: 'pay:read',
    query: z.object({ end_user_ref: z.string().min(1).max(64) }).strict(),
    async handler({ context, db, query }) {
      const account = accountOfContext(context);
      return { status: 200, body: { object: 'list', data: await deposits.senders(db, account, query.end_user_ref) } };
    },
  });

  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/deposits/:id',
    summary: 'Read a deposit',
    responses: { 200: { description: 'The current deposit order.', schema: depositOrderSchema, cache_control: 'no-store' } },
    scope: 'pay:read',
    async handler({ context, db, params }) {
      const account = accountOfContext(context);
      const found = await deposits.getWithRefunds(db, account, params.id ?? '');
      if (!found) throw new ApiError('resource_not_found');
      // An order awaiting payment carries its legs' QR payloads (a receiver's full account number): no cache keeps it.
      return { status: 200, body: found, headers: { 'Cache-Control': 'no-store' } };
    },
  });

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/deposits/:id/slip-token',
    summary: 'Issue a slip upload capability',
    responses: { 200: { description: 'A slip upload capability.', schema: slipUploadSchema, cache_control: 'no-store' } },
    errors: ['deposit_not_payable'],
    scope: 'pay:write',
    async handler({ context, db, params }) {
      const account = accountOfContext(context);
      const result = await deposits.issueSlipToken(db, account, params.id ?? '', context.api_version);
      if (!result) throw new ApiError('resource_not_found');
      if (!result.ok) throw result.error;
      return { status: 200, body: result.value, headers: { 'Cache-Control': 'no-store' } };
    },
  });

  registrar.merchant({
    method: 'POST',
    url: '/v1/pay/deposits/:id/cancel',
    summary: 'Cancel a deposit',
    responses: { 200: { description: 'The canceled order.', schema: depositOrderSchema } },
    errors: ['deposit_not_cancelable', 'deposit_state_conflict'],
    scope: 'pay:write',
    async handler({ context, db, params }) {
      const account = accountOfContext(context);
      const result = await deposits.cancel(db, account, params.id ?? '', 'merchant', context.cause);
      if (!result) throw new ApiError('resource_not_found');
      if (!result.ok) throw result.error;
      return { status: 200, body: result.value };
    },
  });
}
