import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';

/**
 * A reference webhook receiver: what a merchant's server does with our webhooks, written against the
 * spec only (it imports nothing from the service). The tests run it as a real HTTPS server.
 *
 * For each request it:
 *  1. verifies X-PG-Signature over the raw bytes before parsing anything: Ed25519 over
 *     `v1.<t>.<event_id>.` + body, with the key named by `kid`, fetched from
 *     GET /v1/webhooks/signing-keys (cached at most 24 hours; an unknown kid triggers one refetch,
 *     at most one every 10 seconds, so that forged kids cannot make it hammer the service);
 *  2. refuses a `t` more than 300 seconds from its own clock;
 *  3. checks that the body's `id` is the X-PG-Event-Id header and that `livemode` is its environment;
 *  4. answers 200 and does nothing for an event id it has already processed;
 *  5. applies `data.object` only when its `version` is higher than the stored one (an object without
 *     a version, such as a balance_transaction, once per object id), and answers 200 to a stale one.
 * The decision is taken from `data.object.status`, never from the event type.
 */

export const MAX_CLOCK_SKEW_SECONDS = 300;
export const KEY_CACHE_MAX_AGE_MS = 24 * 60 * 60 * 1000;
export const UNKNOWN_KID_REFETCH_INTERVAL_MS = 10 * 1000;
const MAX_BODY_BYTES = 1024 * 1024;

export interface PublishedKey {
  kid: string;
  alg: string;
  public_key: string;
  format: string;
  raw_public_key: string;
  status: string;
  not_before: string;
  not_after: string | null;
}

/** Keys from the signing-keys endpoint, cached at most 24 hours, refetched once on an unknown kid. */
export class SigningKeyCache {
  private keys = new Map<string, crypto.KeyObject>();
  private fetched_at_ms: number | null = null;
  private last_unknown_refetch_ms: number | null = null;
  private inFlight: Promise<void> | null = null;
  /** How many times the endpoint was read (for tests and logs). */
  fetches = 0;

  constructor(
    private readonly fetchKeys: () => Promise<{ keys: PublishedKey[] }>,
    private readonly now_ms: () => number,
  ) {}

  async key(kid: string): Promise<crypto.KeyObject | null> {
    const now = this.now_ms();
    if (this.fetched_at_ms === null || now - this.fetched_at_ms >= KEY_CACHE_MAX_AGE_MS) await this.refresh();
    const known = this.keys.get(kid);
    if (known) return known;
    if (this.last_unknown_refetch_ms !== null && now - this.last_unknown_refetch_ms < UNKNOWN_KID_REFETCH_INTERVAL_MS) return null;
    this.last_unknown_refetch_ms = now;
    await this.refresh();
    return this.keys.get(kid) ?? null;
  }

  private refresh(): Promise<void> {
    // Concurrent requests share one fetch.
    this.inFlight ??= (async () => {
      try {
        const document = await this.fetchKeys();
        const keys = new Map<string, crypto.KeyObject>();
        for (const entry of document.keys) {
          if (entry.alg !== 'Ed25519' || entry.format !== 'spki_der_base64') continue;
          keys.set(entry.kid, crypto.createPublicKey({ key: Buffer.from(entry.public_key, 'base64'), format: 'der', type: 'spki' }));
        }
        this.keys = keys;
        this.fetched_at_ms = this.now_ms();
        this.fetches += 1;
      } finally {
        this.inFlight = null;
      }
    })();
    return this.inFlight;
  }
}

export type ProcessOutcome = 'applied' | 'stale' | 'duplicate';

export interface StoredObject {
  version: number | null;
  object: Record<string, unknown>;
}

/**
 * The receiver's storage. In memory here; a real merchant does `process` in one database transaction
 * (insert the event id with a unique key, then `UPDATE … WHERE version < $incoming`), which is what
 * makes it atomic across processes.
 */
export class MemoryReceiverStore {
  readonly seen = new Map<string, number>();
  readonly objects = new Map<string, StoredObject>();
  readonly applied: { event_id: string; type: string; object_id: string | null; version: number | null }[] = [];

  process(event: ReceivedEvent, now_ms: number): ProcessOutcome {
    if (this.seen.has(event.id)) return 'duplicate';
    this.seen.set(event.id, now_ms);
    const object = event.data.object;
    const id = typeof object.id === 'string' ? object.id : null;
    const version = typeof object.version === 'number' ? object.version : null;
    if (id !== null) {
      const key = `${String(object.object)}:${id}`;
      const stored = this.objects.get(key);
      const newer = stored === undefined || (version !== null && stored.version !== null && version > stored.version);
      if (!newer) return 'stale';
      this.objects.set(key, { version, object });
    }
    this.applied.push({ event_id: event.id, type: event.type, object_id: id, version });
    return 'applied';
  }

  /** The stored state of an object, as the merchant's database would hold it. */
  object(type: string, id: string): Record<string, unknown> | null {
    return this.objects.get(`${type}:${id}`)?.object ?? null;
  }
}

export interface ReceivedEvent {
  id: string;
  object: string;
  type: string;
  livemode: boolean;
  data: { object: Record<string, unknown> };
  [field: string]: unknown;
}

export interface ReceiverAnswer {
  status: number;
  body: { ok: boolean; outcome?: ProcessOutcome; error?: string };
}

export interface ReferenceReceiverOptions {
  /** The environment this receiver serves: false for the sandbox. */
  livemode: boolean;
  keys: SigningKeyCache;
  store?: MemoryReceiverStore;
  /** The receiver's clock in milliseconds (Date.now by default). */
  now_ms?: () => number;
}

function header(headers: http.IncomingHttpHeaders, name: string): string | null {
  const value = headers[name];
  return typeof value === 'string' ? value : null;
}

/** Parses `v1,kid=…,t=…,s=…` as name=value pairs (never by position); null when malformed. */
export function parseSignature(value: string): { kid: string; t: number; s: string } | null {
  const parts = value.split(',').map((part) => part.trim());
  if (!parts.includes('v1')) return null;
  const pairs = new Map<string, string>();
  for (const part of parts) {
    if (part === 'v1') continue;
    const index = part.indexOf('=');
    if (index <= 0 || pairs.has(part.slice(0, index))) return null;
    pairs.set(part.slice(0, index), part.slice(index + 1));
  }
  const kid = pairs.get('kid');
  const t = pairs.get('t');
  const s = pairs.get('s');
  if (!kid || !t || !s || !/^[0-9]{1,12}$/.test(t) || !/^[A-Za-z0-9_-]+$/.test(s)) return null;
  return { kid, t: Number(t), s };
}

export class ReferenceReceiver {
  readonly store: MemoryReceiverStore;
  private readonly now_ms: () => number;

  constructor(private readonly options: ReferenceReceiverOptions) {
    this.store = options.store ?? new MemoryReceiverStore();
    this.now_ms = options.now_ms ?? (() => Date.now());
  }

  async handle(rawBody: Buffer, headers: http.IncomingHttpHeaders): Promise<ReceiverAnswer> {
    const refuse = (status: number, error: string): ReceiverAnswer => ({ status, body: { ok: false, error } });
    const signatureHeader = header(headers, 'x-pg-signature');
    const eventId = header(headers, 'x-pg-event-id');
    if (!signatureHeader || !eventId) return refuse(401, 'signature_missing');
    const signature = parseSignature(signatureHeader);
    if (!signature) return refuse(401, 'signature_malformed');
    if (Math.abs(Math.floor(this.now_ms() / 1000) - signature.t) > MAX_CLOCK_SKEW_SECONDS) return refuse(401, 'timestamp_out_of_window');
    const key = await this.options.keys.key(signature.kid);
    if (!key) return refuse(401, 'unknown_kid');
    const signed = Buffer.concat([Buffer.from(`v1.${signature.t}.${eventId}.`, 'utf8'), rawBody]);
    if (!crypto.verify(null, signed, key, Buffer.from(signature.s, 'base64url'))) return refuse(401, 'signature_invalid');

    // Only now is the body parsed: everything below works on verified bytes.
    let event: ReceivedEvent;
    try {
      event = JSON.parse(rawBody.toString('utf8')) as ReceivedEvent;
    } catch {
      return refuse(400, 'malformed_json');
    }
    if (event.id !== eventId) return refuse(400, 'event_id_mismatch');
    if (event.livemode !== this.options.livemode) return refuse(400, 'livemode_mismatch');
    if (!event.data || typeof event.data.object !== 'object' || event.data.object === null) return refuse(400, 'malformed_event');
    const outcome = this.store.process(event, this.now_ms());
    return { status: 200, body: { ok: true, outcome } };
  }
}

export interface ReceiverServerOptions {
  receiver: ReferenceReceiver;
  /** PEM key and certificate; without them the server speaks plain HTTP (local sandbox only). */
  tls?: { key: string; cert: string };
  host?: string;
  port?: number;
}

/** Serves the receiver on POST (any path). Resolves with the listening server and its base URL. */
export async function startReceiverServer(options: ReceiverServerOptions): Promise<{ server: http.Server; url: string; close: () => Promise<void> }> {
  const listener = (request: http.IncomingMessage, response: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) request.destroy();
      else chunks.push(chunk);
    });
    request.on('end', () => {
      if (request.method !== 'POST') {
        response.writeHead(405).end();
        return;
      }
      options.receiver.handle(Buffer.concat(chunks), request.headers).then(
        (answer) => response.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body)),
        () => response.writeHead(500).end(),
      );
    });
  };
  const server = options.tls ? https.createServer({ key: options.tls.key, cert: options.tls.cert, minVersion: 'TLSv1.2' }, listener) : http.createServer(listener);
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, host, resolve));
  const port = (server.address() as { port: number }).port;
  const url = `${options.tls ? 'https' : 'http'}://${host}:${port}/webhooks`;
  return {
    server,
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Keys fetched with the global fetch from the service's public endpoint. */
export function fetchKeysFrom(signing_keys_url: string): () => Promise<{ keys: PublishedKey[] }> {
  return async () => {
    const response = await fetch(signing_keys_url, { redirect: 'error', signal: AbortSignal.timeout(10_000) });
    if (!response.ok) throw new Error(`signing keys answered HTTP ${response.status}`);
    return (await response.json()) as { keys: PublishedKey[] };
  };
}
