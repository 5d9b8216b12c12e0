import { z } from 'zod';
import { cursorListSchema, timestampSchema, type Describes } from '../http/response-fields.ts';
import type { EventEnvelope } from './envelope.ts';

/**
 * The event envelope (spec, Events, "Envelope"), identical on every event: in GET /v1/pay/events and in
 * every webhook delivery's body. `data.object` is the full business object at that moment (a
 * deposit_order, withdrawal_order, balance_transaction, beneficiary, claim, ...): branch on
 * `data.object.object` and `data.object.status`, not on `type`.
 */
export const eventSchema = z
  .object({
    id: z.string().meta({ description: 'Unique forever; identical on every attempt and resend.' }),
    object: z.literal('event'),
    type: z.string().meta({ description: 'Open enum: keep a default branch. Examples: `deposit.settled`, `withdrawal.filled`, `balance.credited`.' }),
    api_version: z.string().meta({ description: 'YYYY-MM-DD, pinned when the event was created.' }),
    livemode: z.boolean(),
    created_at: timestampSchema,
    sequence: z.number().int().meta({ description: 'Per merchant, increasing; a temporary gap is normal.' }),
    account: z.object({ merchant_id: z.string(), white_label_id: z.string() }),
    request: z.object({ id: z.string().optional(), idempotency_key: z.string().optional() }).optional(),
    data: z.object({
      object: z.record(z.string(), z.unknown()).meta({ description: 'The full business object at that moment.' }),
      previous_attributes: z
        .record(z.string(), z.unknown())
        .nullable()
        .optional()
        .meta({ description: 'Only changed keys plus the old `version`; null on `*.created`; absent for immutable objects (balance_transaction).' }),
    }),
  })
  .meta({ id: 'event' });

/** GET /v1/pay/events: the reconcile feed. */
export const eventListSchema = cursorListSchema(eventSchema);

const _event: Describes<typeof eventSchema, EventEnvelope> = true;
void _event;
