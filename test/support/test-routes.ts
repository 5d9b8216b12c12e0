import { z } from 'zod';
import type { ExtraRouteModule } from '../../src/app.ts';
import { creationBuckets } from '../../src/http/rate-limit.ts';
import { newId } from '../../src/platform/ids.ts';
import { ApiError } from '../../src/platform/errors.ts';
import { formatTimestamp } from '../../src/platform/time.ts';

/**
 * A test-only write route that behaves like a real creation endpoint: signed, rate limited per end
 * user, idempotent, and writing an event in the request's transaction. `gate` lets a test hold the
 * handler open to observe a concurrent request; `fail_with` makes it throw after its write so that
 * the rollback can be checked.
 */
export interface TestRouteControls {
  gate: Promise<void> | null;
  entered: () => void;
  executions: number;
}

export function testWriteRoutes(controls: TestRouteControls = { gate: null, entered: () => {}, executions: 0 }): ExtraRouteModule {
  return (services) => (registrar) => {
    registrar.merchant({
      method: 'POST',
      url: '/v1/pay/test-writes',
      scope: 'pay:write',
      body: z
        .object({
          amount_minor: z.number().int().positive(),
          end_user_ref: z.string().min(1).max(64).default('user-1'),
          client: z.object({ device_fingerprint: z.string(), ip: z.string(), user_agent: z.string() }).partial().optional(),
          fail_with: z.enum(['plain_error', 'committed_conflict', 'final_refusal', 'retryable_refusal']).optional(),
        })
        .strict(),
      extraBuckets: (body, context) => creationBuckets(body, context),
      async handler({ context, db, body }) {
        controls.executions += 1;
        controls.entered();
        if (controls.gate) await controls.gate;
        const object = {
          id: newId('deposit'),
          object: 'test_write',
          version: 1,
          status: 'created',
          amount_minor: body.amount_minor,
          created_at: formatTimestamp(services.clock.now()),
        };
        await services.events.emitEvent(db, {
          white_label_id: context.white_label_id,
          merchant_id: context.merchant_id,
          livemode: context.livemode,
          type: 'test_write.created',
          object,
          previous_attributes: null,
          cause: context.cause,
        });
        if (body.fail_with === 'plain_error') throw new Error('boom with sk_test_secretvalue1234567890 inside');
        // A refusal no retry of the same request can turn, and one a retry after re-reading may get past.
        if (body.fail_with === 'final_refusal') throw new ApiError('merchant_reference_in_use', { details: { written_event_for: object.id } });
        if (body.fail_with === 'retryable_refusal') throw new ApiError('alloc_state_conflict');
        if (body.fail_with === 'committed_conflict') {
          throw new ApiError('beneficiary_not_verified', { commit_writes: true, details: { written_event_for: object.id } });
        }
        return { status: 201, body: object };
      },
    });
  };
}

export function gatedControls(): TestRouteControls & { open: () => void; waitEntered: () => Promise<void> } {
  let open = () => {};
  let markEntered = () => {};
  const enteredPromise = new Promise<void>((resolve) => {
    markEntered = resolve;
  });
  const controls = {
    gate: new Promise<void>((resolve) => {
      open = resolve;
    }),
    entered: () => markEntered(),
    executions: 0,
    open: () => open(),
    waitEntered: () => enteredPromise,
  };
  return controls;
}
