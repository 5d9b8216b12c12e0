import { z } from 'zod';
import { pagedListSchema, timestampSchema, type Describes } from '../http/response-fields.ts';
import type { AttemptView, DeliveryView, EndpointView, ReplayResult } from './service.ts';
import type { RotationResult, SigningKeyRecord } from './signing-keys.ts';

/** Response schemas of the webhooks module: signing keys (public), endpoints and deliveries (back office). */

export const signingKeySchema = z
  .object({
    kid: z.string(),
    alg: z.literal('Ed25519'),
    public_key: z.string().meta({ description: 'SPKI DER, standard base64.' }),
    format: z.literal('spki_der_base64'),
    raw_public_key: z.string().meta({ description: 'The raw 32-byte key, standard base64.' }),
    status: z.enum(['active', 'next', 'retiring']),
    not_before: timestampSchema,
    not_after: timestampSchema.nullable(),
  })
  .meta({ id: 'webhook_signing_key' });

export const signingKeyListSchema = z.object({ keys: z.array(signingKeySchema) });

export const keyRotationSchema = z
  .object({
    object: z.literal('webhook_key_rotation'),
    livemode: z.boolean(),
    rotated: z.boolean(),
    new_key: signingKeySchema,
    previous_kid: z.string().nullable(),
    signing_switches_at: timestampSchema,
    previous_key_not_after: timestampSchema.nullable(),
    announced_to: z.number().int(),
  })
  .meta({ id: 'webhook_key_rotation' });

export const webhookEndpointSchema = z
  .object({
    object: z.literal('webhook_endpoint'),
    id: z.string(),
    white_label_id: z.string(),
    merchant_id: z.string(),
    livemode: z.boolean(),
    deposit_url: z.string().meta({ description: "The merchant's webhook receiving address (the spec's name for it)." }),
    url: z.string().meta({ description: 'The same address under its earlier name.' }),
    enabled: z.boolean(),
    status: z.enum(['enabled', 'disabled']),
    disabled_reason: z.enum(['operator', 'endpoint_gone']).nullable(),
    event_types: z.array(z.string()).nullable().meta({ description: 'Null: every event type.' }),
    always_delivered: z.array(z.string()).meta({ description: 'Delivered whatever event_types says.' }),
    description: z.string().nullable(),
    version: z.number().int(),
    created_at: timestampSchema,
    updated_at: timestampSchema,
    disabled_at: timestampSchema.nullable(),
  })
  .meta({ id: 'webhook_endpoint' });

export const webhookEndpointListSchema = pagedListSchema(webhookEndpointSchema);

export const deletedWebhookEndpointSchema = z.object({ object: z.literal('webhook_endpoint'), id: z.string(), deleted: z.literal(true) });

export const webhookAttemptSchema = z
  .object({
    object: z.literal('webhook_delivery_attempt'),
    delivery_id: z.string(),
    sequence: z.number().int(),
    round: z.number().int(),
    attempt: z.number().int(),
    resend: z.boolean(),
    kid: z.string().nullable(),
    status: z.enum(['succeeded', 'failed', 'lost']),
    http_status: z.number().int().nullable(),
    error: z.string().nullable(),
    started_at: timestampSchema,
    duration_ms: z.number().int().nullable(),
    next_attempt_at: timestampSchema.nullable(),
  })
  .meta({ id: 'webhook_delivery_attempt' });

export const webhookDeliverySchema = z
  .object({
    object: z.literal('webhook_delivery'),
    id: z.string(),
    endpoint_id: z.string(),
    event_id: z.string(),
    event_type: z.string(),
    livemode: z.boolean(),
    status: z.enum(['pending', 'succeeded', 'failed']),
    failure_reason: z.string().nullable(),
    round: z.number().int(),
    round_attempts: z.number().int(),
    attempt_count: z.number().int(),
    resend: z.boolean(),
    resend_requested: z.boolean(),
    next_attempt_at: timestampSchema.nullable(),
    last_attempt_at: timestampSchema.nullable(),
    last_http_status: z.number().int().nullable(),
    last_error: z.string().nullable(),
    event_created_at: timestampSchema,
    created_at: timestampSchema,
    completed_at: timestampSchema.nullable(),
    attempts: z.array(webhookAttemptSchema).optional().meta({ description: 'On the read of one delivery.' }),
  })
  .meta({ id: 'webhook_delivery' });

export const webhookDeliveryListSchema = pagedListSchema(webhookDeliverySchema);

export const webhookReplaySchema = z
  .object({
    object: z.literal('webhook_replay'),
    endpoint_id: z.string(),
    only_failed: z.boolean(),
    created_after: timestampSchema,
    created_before: timestampSchema,
    event_types: z.array(z.string()).nullable(),
    rearmed: z.number().int().meta({ description: 'Finished deliveries sent again.' }),
    created: z.number().int().meta({ description: 'Deliveries made for events that had none to this endpoint (full replays only).' }),
    limit_reached: z.boolean().meta({ description: 'True when the limit was reached: repeat with a later created_after for the rest.' }),
  })
  .meta({ id: 'webhook_replay' });

/** POST /v1/test/webhooks/replay-out-of-order: the three cases of the spec, their events and the state a receiver must end in. */
export const replayOutOfOrderSchema = z
  .object({
    object: z.literal('webhook_replay_out_of_order'),
    livemode: z.literal(false),
    cases: z.array(
      z.object({
        case: z.enum(['A', 'B', 'C']),
        object_id: z.string(),
        event_ids: z.array(z.string()),
        expected_final: z.object({ status: z.string(), version: z.number().int(), remaining_minor: z.number().int().optional() }),
      }),
    ),
  })
  .meta({ id: 'webhook_replay_out_of_order' });

const _signingKey: Describes<typeof signingKeySchema, SigningKeyRecord> = true;
const _rotation: Describes<typeof keyRotationSchema, RotationResult> = true;
const _endpoint: Describes<typeof webhookEndpointSchema, EndpointView> = true;
const _attempt: Describes<typeof webhookAttemptSchema, AttemptView> = true;
const _delivery: Describes<typeof webhookDeliverySchema, DeliveryView> = true;
const _replay: Describes<typeof webhookReplaySchema, ReplayResult> = true;
void [_signingKey, _rotation, _endpoint, _attempt, _delivery, _replay];
