import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { outsideTestClock, type Clock } from '../platform/clock.ts';
import { formatTimestamp } from '../platform/time.ts';
import { invariant } from '../platform/assert.ts';
import { timestampSchema, type Describes } from '../http/response-fields.ts';
import { accountOfContext, type RouteRegistrar, type RouteModule } from '../http/context.ts';
import { deliveryHeaders } from './dispatcher.ts';
import type { SigningKeyService } from './signing-keys.ts';
import { signWebhookPayload } from './signing.ts';
import { newWebhookId } from './types.ts';
import type { EventsService } from '../events/service.ts';

/**
 * Local forwarding (`npm run cli -- listen --forward-to …`, src/cli/listen.ts): a merchant's laptop
 * receives its sandbox events without a public address. The CLI follows the merchant's events feed and,
 * for each event, asks this route for the delivery the service would send for it now: the stored
 * envelope bytes, signed with the brand's sandbox key set at this instant, with every delivery header.
 * The CLI posts exactly that to the local URL, so the receiver verifies it with the public signing keys
 * like any real delivery. The private keys never leave the service: it signs, the CLI only carries bytes.
 *
 * GET /v1/test/webhooks/events/{event_id}/signed-delivery (test keys only, `events:read`). It signs only
 * the caller's own sandbox events as they are stored, which the caller would receive anyway from an
 * endpoint: it cannot make the service sign anything else. A live key gets 404 like every sandbox route.
 * `t` is real time even under a sandbox test clock, as a real delivery's is. Nothing is stored: the
 * delivery id is fresh on every call, and the endpoint id names local forwarding, not an endpoint row.
 */

/** X-PG-Endpoint-Id of a forwarded delivery: no endpoint row stands behind it. */
export const LOCAL_FORWARDING_ENDPOINT_ID = 'local_forwarding';

export interface SignedDeliveryView {
  object: 'webhook_signed_delivery';
  event_id: string;
  event_type: string;
  sequence: number;
  livemode: boolean;
  kid: string;
  signed_at: string;
  /** The headers to send, names in lower case, exactly as a delivery attempt sends them. */
  headers: Record<string, string>;
  /** The body to send, byte for byte (standard base64 of the stored envelope's UTF-8 text). */
  body_base64: string;
}

export const signedDeliverySchema = z
  .object({
    object: z.literal('webhook_signed_delivery'),
    event_id: z.string(),
    event_type: z.string(),
    sequence: z.number().int(),
    livemode: z.boolean(),
    kid: z.string(),
    signed_at: timestampSchema,
    headers: z.record(z.string(), z.string()).meta({ description: 'Every header of a delivery attempt, names in lower case, X-PG-Signature included.' }),
    body_base64: z.string().meta({ description: 'The request body to send byte for byte, standard base64.' }),
  })
  .meta({ id: 'webhook_signed_delivery' });

const describesView: Describes<typeof signedDeliverySchema, SignedDeliveryView> = true;
void describesView;

/** Event ids are `evt_` plus a ULID; anything else names nothing and is answered 404 without a query. */
const EVENT_ID_PATTERN = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/;

/** What the local forwarding routes call. */
export interface LocalForwardingRouteDependencies {
  clock: Clock;
  events: EventsService;
  signingKeys: SigningKeyService;
}

/** The local forwarding routes, on the services they call. */
export function localForwardingRoutes(services: LocalForwardingRouteDependencies): RouteModule {
  return (registrar) => registerLocalForwardingRoutes(registrar, services);
}

function registerLocalForwardingRoutes(registrar: RouteRegistrar, services: LocalForwardingRouteDependencies): void {
  registrar.merchant({
    method: 'GET',
    url: '/v1/test/webhooks/events/:event_id/signed-delivery',
    summary: 'A signed delivery of one of your events, for local forwarding (sandbox)',
    responses: {
      200: {
        description: 'The headers and body a delivery of this event sends now, signed; post them unchanged to the local receiver.',
        schema: signedDeliverySchema,
        cache_control: 'no-store',
      },
    },
    errors: ['resource_not_found'],
    scope: 'events:read',
    // A real delivery is signed in real time, so a forwarded one is too, whatever clock the sandbox is on.
    outside_test_clock: true,
    async handler({ context, db, params }) {
      if (context.livemode) throw new ApiError('resource_not_found');
      const event_id = params.event_id ?? '';
      if (!EVENT_ID_PATTERN.test(event_id)) throw new ApiError('resource_not_found');
      const account = accountOfContext(context);
      const stored = await services.events.findEventText(db, account, event_id);
      if (!stored) throw new ApiError('resource_not_found');
      invariant(stored.livemode === false, 'a sandbox key reads only sandbox events');
      const signer = await services.signingKeys.signer({ white_label_id: account.white_label_id, livemode: false });
      const signedAt = outsideTestClock(() => services.clock.now());
      const body = Buffer.from(stored.text, 'utf8');
      const signature = signWebhookPayload({ private_key: signer.private_key, kid: signer.kid, t: Math.floor(signedAt.getTime() / 1000), event_id, body });
      const headers = deliveryHeaders(
        {
          event_id,
          delivery_id: newWebhookId('delivery'),
          endpoint_id: LOCAL_FORWARDING_ENDPOINT_ID,
          attempt: 1,
          resend: false,
          api_version: stored.api_version,
          livemode: false,
          event_type: stored.type,
        },
        signature.header,
      );
      const view: SignedDeliveryView = {
        object: 'webhook_signed_delivery',
        event_id,
        event_type: stored.type,
        sequence: stored.sequence,
        livemode: false,
        kid: signer.kid,
        signed_at: formatTimestamp(signedAt),
        headers,
        body_base64: body.toString('base64'),
      };
      // The signature is fresh and time-bound: no cache may keep it.
      return { status: 200, body: view, headers: { 'Cache-Control': 'no-store' } };
    },
  });
}
