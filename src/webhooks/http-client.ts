import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { performance } from 'node:perf_hooks';
import tls from 'node:tls';
import { schemeAllowed, literalAddressOf, type AddressPolicy } from './url-policy.ts';

/**
 * Sends one attempt and reports what came back, never throwing. Rules of the spec enforced here:
 * redirects are never followed (a 3xx is just a status), the certificate must verify against the trust
 * store (a self-signed one fails), TLS 1.2 or later, and an answer must arrive within the timeout
 * (15 seconds by default). Each endpoint has its own keep-alive agent whose socket limit is the
 * endpoint's concurrency, so a slow endpoint can only tie up its own sockets.
 *
 * Addresses are checked when the connection is made, on every address the name resolves to, so that
 * DNS cannot point a checked name at a private address afterwards.
 */

export interface AttemptRequest {
  endpoint_id: string;
  url: string;
  livemode: boolean;
  headers: Record<string, string>;
  body: Buffer;
}

export interface AttemptResponse {
  /** The status of the answer; null when there was none. */
  http_status: number | null;
  /** A stable word for what went wrong without an answer; null when an answer arrived. */
  error: string | null;
  duration_ms: number;
}

export interface DeliveryClientOptions {
  timeout_ms: number;
  endpoint_concurrency: number;
  policy: AddressPolicy;
  sandbox_loopback: boolean;
  /**
   * Extra trusted certificate authorities (PEM), added to Node's bundled roots. Passed explicitly
   * rather than through NODE_EXTRA_CA_CERTS, so that it is visible configuration and tests can set it
   * per client.
   */
  extra_ca_pem?: readonly string[];
  /** Name resolution; dns.lookup by default (tests may map names to local addresses). */
  lookup?: typeof dns.lookup;
}

/** The most of an answer's body read before the connection is dropped; the body is never stored. */
const MAX_RESPONSE_BYTES = 64 * 1024;
/** Agents kept for endpoints; the least recently used one is closed beyond this. */
const MAX_AGENTS = 2_000;

class AddressNotAllowed extends Error {
  readonly code = 'EADDRNOTALLOWED';
  constructor(hostname: string) {
    super(`${hostname} resolves to an address that may not receive webhooks`);
    this.name = 'AddressNotAllowed';
  }
}

const TLS_CERTIFICATE_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'HOSTNAME_MISMATCH',
]);

/** Maps a socket or TLS failure to the word recorded on the attempt. */
export function classifyNetworkError(error: unknown): string {
  const code = (error as { code?: unknown })?.code;
  if (typeof code !== 'string') return 'network_error';
  if (TLS_CERTIFICATE_CODES.has(code)) return 'tls_certificate_invalid';
  switch (code) {
    case 'EADDRNOTALLOWED':
      return 'address_not_allowed';
    case 'ECONNREFUSED':
      return 'connection_refused';
    case 'ECONNRESET':
    case 'EPIPE':
    case 'ERR_STREAM_PREMATURE_CLOSE':
      return 'connection_closed';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_FAIL':
      return 'dns_failure';
    case 'ETIMEDOUT':
    case 'ESOCKETTIMEDOUT':
      return 'timeout';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host_unreachable';
    default:
      return code.startsWith('ERR_SSL') || code === 'EPROTO' ? 'tls_handshake_failed' : 'network_error';
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/** A lookup for the agent that refuses names resolving to any address the policy forbids. */
function guardedLookup(policy: AddressPolicy, livemode: boolean, base: typeof dns.lookup): net.LookupFunction {
  const lookup = (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    base(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) {
        callback(error, []);
        return;
      }
      const list = addresses as unknown as dns.LookupAddress[];
      if (list.length === 0 || list.some((entry) => !policy.allows(entry.address, livemode))) {
        callback(new AddressNotAllowed(hostname) as NodeJS.ErrnoException, []);
        return;
      }
      if (options.all) {
        callback(null, list);
        return;
      }
      const first = list[0] as dns.LookupAddress;
      callback(null, first.address, first.family);
    });
  };
  return lookup as unknown as net.LookupFunction;
}

export class DeliveryClient {
  private readonly agents = new Map<string, http.Agent>();
  private readonly secureContext: tls.SecureContext | undefined;

  constructor(private readonly options: DeliveryClientOptions) {
    // Giving `ca` replaces Node's roots, so the extra authorities are added to the bundled ones. It is
    // built once as a secure context: a `ca` option would be serialised into the agent's pool key on
    // every request and compiled into a new context on every connection.
    this.secureContext =
      options.extra_ca_pem && options.extra_ca_pem.length > 0
        ? tls.createSecureContext({ ca: [...tls.rootCertificates, ...options.extra_ca_pem], minVersion: 'TLSv1.2' })
        : undefined;
  }

  async send(request: AttemptRequest): Promise<AttemptResponse> {
    const started = performance.now();
    const elapsed = () => Math.max(0, Math.round(performance.now() - started));
    let url: URL;
    try {
      url = new URL(request.url);
    } catch {
      return { http_status: null, error: 'url_not_allowed', duration_ms: 0 };
    }
    if (!schemeAllowed(url, request.livemode, this.options.sandbox_loopback)) {
      return { http_status: null, error: 'url_not_allowed', duration_ms: 0 };
    }
    // A literal address skips name resolution, so it is judged here instead of in the lookup.
    const literal = literalAddressOf(url);
    if (literal && !this.options.policy.allows(literal, request.livemode)) {
      return { http_status: null, error: 'address_not_allowed', duration_ms: 0 };
    }
    const agent = this.agentFor(request.endpoint_id, url, request.livemode);
    const transport = url.protocol === 'https:' ? https : http;

    return new Promise<AttemptResponse>((resolve) => {
      let settled = false;
      const settle = (response: Omit<AttemptResponse, 'duration_ms'>) => {
        if (settled) return;
        settled = true;
        resolve({ ...response, duration_ms: elapsed() });
      };
      const outgoing = transport.request(url, {
        method: 'POST',
        agent,
        headers: { ...request.headers, 'content-length': String(request.body.length) },
      });
      // The deadline covers the whole exchange: no answer in time is a failure, and a body still
      // streaming at the deadline is cut off (its status already decided the attempt).
      const timer = setTimeout(() => {
        settle({ http_status: null, error: 'timeout' });
        outgoing.destroy(Object.assign(new Error('webhook attempt timed out'), { code: 'ETIMEDOUT' }));
      }, this.options.timeout_ms);
      outgoing.on('response', (incoming) => {
        settle({ http_status: incoming.statusCode ?? null, error: null });
        let received = 0;
        incoming.on('data', (chunk: Buffer) => {
          received += chunk.length;
          if (received > MAX_RESPONSE_BYTES) incoming.destroy();
        });
        incoming.on('close', () => clearTimeout(timer));
        incoming.on('error', () => undefined);
      });
      outgoing.on('error', (error) => {
        clearTimeout(timer);
        settle({ http_status: null, error: classifyNetworkError(error) });
      });
      outgoing.end(request.body);
    });
  }

  /** Closes every kept connection (on stop). */
  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  private agentFor(endpoint_id: string, url: URL, livemode: boolean): http.Agent {
    const key = `${endpoint_id} ${url.origin} ${livemode}`;
    const existing = this.agents.get(key);
    if (existing) {
      // Re-inserting keeps the map in least-recently-used order.
      this.agents.delete(key);
      this.agents.set(key, existing);
      return existing;
    }
    const common = {
      keepAlive: true,
      maxSockets: this.options.endpoint_concurrency,
      maxFreeSockets: this.options.endpoint_concurrency,
      scheduling: 'lifo' as const,
      lookup: guardedLookup(this.options.policy, livemode, this.options.lookup ?? dns.lookup),
    };
    const agent =
      url.protocol === 'https:'
        ? new https.Agent({ ...common, minVersion: 'TLSv1.2', rejectUnauthorized: true, ...(this.secureContext ? { secureContext: this.secureContext } : {}) })
        : new http.Agent(common);
    this.agents.set(key, agent);
    if (this.agents.size > MAX_AGENTS) {
      const oldest = this.agents.keys().next().value;
      if (oldest !== undefined) {
        this.agents.get(oldest)?.destroy();
        this.agents.delete(oldest);
      }
    }
    return agent;
  }
}
