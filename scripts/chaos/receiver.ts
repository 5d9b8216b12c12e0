import crypto from 'node:crypto';
import http from 'node:http';
import { parseSignature, SigningKeyCache, type PublishedKey } from '../../examples/webhook-receiver/receiver.ts';

/**
 * The chaos run's webhook receiver, a child process of the driver (so that the driver's load does not
 * delay its answers). It verifies every delivery as the reference receiver does (Ed25519 over
 * `v1.<t>.<event_id>.` + the raw body, keys from GET /v1/webhooks/signing-keys; the body's id is the
 * X-PG-Event-Id; sandbox events only), and keeps, per event id, the SHA-256 of the bytes it first
 * acknowledged: a later delivery of the same id with other bytes is counted as a conflict.
 *
 * It misbehaves on purpose while the load runs: the first delivery of an event gets a 500 with
 * probability `failure_rate`, or hangs (no answer; the service's timeout ends the attempt) with
 * probability `hang_rate`. An event is refused at most once, so that its retry (one minute later, the
 * spec's schedule) is answered 200 and the run can wait for it. After `calm`, every delivery is answered.
 *
 * Messages from the parent: {type:'configure', base_urls, failure_rate, hang_rate}, {type:'calm'},
 * {type:'report'}. To the parent: {type:'listening', port}, {type:'report', report}.
 */

export interface ReceiverEventRecord {
  event_id: string;
  merchant_id: string;
  type: string;
  sha256: string;
  /** Deliveries answered 200 (the first one and its duplicates). */
  acknowledged: number;
  /** Later deliveries with other bytes than the first acknowledged one. */
  conflicting: number;
  first_acknowledged_ms: number;
}

export interface ReceiverReport {
  events: ReceiverEventRecord[];
  deliveries: number;
  answered_500: number;
  hung: number;
  /** Signatures that did not verify with the key their kid names. */
  signature_failures: number;
  /** Deliveries whose kid the receiver could not resolve yet (its refetch is throttled to one per 10 s, as the reference receiver's). */
  unknown_kid: number;
  malformed: number;
  /** Deliveries whose body id was not the X-PG-Event-Id, or not a sandbox event. */
  envelope_mismatches: number;
  key_fetches: number;
}

const HANG_HOLD_MS = 60_000;
const MAX_BODY_BYTES = 1024 * 1024;

interface Configuration {
  base_urls: string[];
  failure_rate: number;
  hang_rate: number;
}

function serve(): void {
  let configuration: Configuration = { base_urls: [], failure_rate: 0, hang_rate: 0 };
  let calm = false;
  const events = new Map<string, ReceiverEventRecord>();
  const refused = new Set<string>();
  const counters = { deliveries: 0, answered_500: 0, hung: 0, signature_failures: 0, unknown_kid: 0, malformed: 0, envelope_mismatches: 0 };
  let nextBase = 0;
  const keys = new SigningKeyCache(async () => {
    // Any API process serves the keys; a killed one is skipped.
    for (let tried = 0; tried < configuration.base_urls.length * 3; tried += 1) {
      const base = configuration.base_urls[nextBase++ % configuration.base_urls.length];
      try {
        const response = await fetch(`${base}/v1/webhooks/signing-keys`, { signal: AbortSignal.timeout(5_000) });
        if (response.ok) return (await response.json()) as { keys: PublishedKey[] };
      } catch {
        // The next process, or the same one restarted.
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error('no API process answered GET /v1/webhooks/signing-keys');
  }, () => Date.now());

  async function handle(body: Buffer, headers: http.IncomingHttpHeaders, response: http.ServerResponse): Promise<void> {
    counters.deliveries += 1;
    const answer = (status: number): void => {
      response.writeHead(status, { 'content-type': 'application/json' }).end(status === 200 ? '{"ok":true}' : '{"ok":false}');
    };
    const eventId = typeof headers['x-pg-event-id'] === 'string' ? headers['x-pg-event-id'] : null;
    const signatureHeader = typeof headers['x-pg-signature'] === 'string' ? headers['x-pg-signature'] : null;
    const signature = signatureHeader ? parseSignature(signatureHeader) : null;
    if (!eventId || !signature) {
      counters.malformed += 1;
      return answer(400);
    }
    let key: crypto.KeyObject | null = null;
    try {
      key = await keys.key(signature.kid);
    } catch {
      key = null;
    }
    if (!key) {
      counters.unknown_kid += 1;
      return answer(401);
    }
    const signed = Buffer.concat([Buffer.from(`v1.${signature.t}.${eventId}.`, 'utf8'), body]);
    if (!crypto.verify(null, signed, key, Buffer.from(signature.s, 'base64url'))) {
      counters.signature_failures += 1;
      return answer(401);
    }
    let event: { id?: unknown; type?: unknown; livemode?: unknown; account?: { merchant_id?: unknown } };
    try {
      event = JSON.parse(body.toString('utf8')) as typeof event;
    } catch {
      counters.malformed += 1;
      return answer(400);
    }
    if (event.id !== eventId || event.livemode !== false) {
      counters.envelope_mismatches += 1;
      return answer(400);
    }
    const sha256 = crypto.createHash('sha256').update(body).digest('hex');
    const known = events.get(eventId);
    if (known) {
      // A duplicate: answered 200 and not applied again (spec, Delivery rules), its bytes compared.
      known.acknowledged += 1;
      if (known.sha256 !== sha256) known.conflicting += 1;
      return answer(200);
    }
    if (!calm && !refused.has(eventId)) {
      const roll = Math.random();
      if (roll < configuration.hang_rate) {
        refused.add(eventId);
        counters.hung += 1;
        // No answer: the service's attempt times out and is retried on its schedule.
        setTimeout(() => response.socket?.destroy(), HANG_HOLD_MS).unref();
        return;
      }
      if (roll < configuration.hang_rate + configuration.failure_rate) {
        refused.add(eventId);
        counters.answered_500 += 1;
        return answer(500);
      }
    }
    events.set(eventId, {
      event_id: eventId,
      merchant_id: typeof event.account?.merchant_id === 'string' ? event.account.merchant_id : '',
      type: typeof event.type === 'string' ? event.type : '',
      sha256,
      acknowledged: 1,
      conflicting: 0,
      first_acknowledged_ms: Date.now(),
    });
    return answer(200);
  }

  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    request.on('end', () => {
      if (size > MAX_BODY_BYTES) {
        counters.malformed += 1;
        response.writeHead(413).end();
        return;
      }
      handle(Buffer.concat(chunks), request.headers, response).catch(() => {
        if (!response.headersSent) response.writeHead(500).end();
      });
    });
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1', () => {
    process.send?.({ type: 'listening', port: (server.address() as { port: number }).port });
  });
  process.on('message', (message: { type: string } & Partial<Configuration>) => {
    if (message.type === 'configure') {
      configuration = { base_urls: message.base_urls ?? [], failure_rate: message.failure_rate ?? 0, hang_rate: message.hang_rate ?? 0 };
    } else if (message.type === 'calm') {
      calm = true;
    } else if (message.type === 'report') {
      const report: ReceiverReport = { events: [...events.values()], ...counters, key_fetches: keys.fetches };
      process.send?.({ type: 'report', report });
    }
  });
  process.on('disconnect', () => process.exit(0));
}

if (process.argv.includes('--serve')) serve();
