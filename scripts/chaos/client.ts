import crypto from 'node:crypto';
import http from 'node:http';
import { signedHeaders } from '../../src/http/canonical.ts';
import type { Slot } from './supervisor.ts';

/**
 * The chaos driver's HTTP client. Every operation is retried until it is acknowledged: a network error
 * (its process was killed), a 5xx, a 429 or a 409 `idempotency_in_flight` is sent again, to whichever API
 * process is up, with the same `Idempotency-Key` and the same body and a new nonce, timestamp and
 * signature (spec, Common request rules 2 and Errors rule 4). Every attempt is recorded with the process
 * that answered it, so that the checks can tell a 5xx of a killed process from one of a live process.
 */

export interface MerchantCredentials {
  api_key: string;
  signing_secret: string;
}

export type RequestSpec =
  | { kind: 'merchant'; method: 'GET' | 'POST'; target: string; body?: string; idempotency_key?: string; credentials: MerchantCredentials }
  | { kind: 'capability'; upload_url: string; token: string; idempotency_key: string; body: Buffer; content_type: string }
  | { kind: 'backoffice'; method: 'GET' | 'POST'; target: string; body?: string; token: string };

export interface AttemptRecord {
  op: string;
  idempotency_key: string | null;
  slot: string;
  pid: number | null;
  started_ms: number;
  ended_ms: number;
  status: number | null;
  /** The transport error (ECONNRESET, ECONNREFUSED, timeout) when there was no answer. */
  error: string | null;
  request_id: string | null;
  code: string | null;
  /** The request changes state (a POST, a slip upload): the failover's first acknowledged write is one of these. */
  write: boolean;
  /** The answer was an Idempotent-Replay of an earlier one: no new write. */
  replay: boolean;
}

export interface Outcome {
  op: string;
  spec: RequestSpec;
  /** acked: a 2xx; refused: a final 4xx (an error changes nothing and is not stored); gave_up: no final answer by the deadline. */
  result: 'acked' | 'refused' | 'gave_up';
  status: number | null;
  code: string | null;
  body_text: string;
  headers: Record<string, string>;
  attempts: number;
}

export interface RetryPolicy {
  /** The latest time a new attempt may start. */
  deadline_ms: number;
  /** Retryable business refusals that are retried a few times (e.g. withdrawal_has_pending_fill). */
  business_retry_codes?: ReadonlySet<string>;
  max_business_retries?: number;
}

/** Each attempt waits at most this long for its answer. */
const ATTEMPT_TIMEOUT_MS = 30_000;
const MAX_BACKOFF_MS = 2_000;
const MAX_RATE_LIMIT_WAIT_MS = 15_000;
/** Headers kept from an answer, for the replay check (the rest vary per attempt: Request-Id, rate headers). */
const KEPT_HEADERS = ['idempotent-replay', 'cache-control', 'content-type', 'location'];

interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function jitter(ms: number): number {
  return Math.round(ms * (0.8 + Math.random() * 0.4));
}

function errorCodeOf(body: Buffer): string | null {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { error?: { code?: unknown } };
    return typeof parsed.error?.code === 'string' ? parsed.error.code : null;
  } catch {
    return null;
  }
}

export class ChaosClient {
  readonly attempts: AttemptRecord[] = [];
  private readonly agents = new Map<string, http.Agent>();

  constructor(private readonly api_slots: readonly Slot[]) {
    for (const slot of api_slots) this.agents.set(slot.name, new http.Agent({ keepAlive: true, maxSockets: 64 }));
  }

  /** A ready API process chosen at random; waits (bounded) for one when none is ready. */
  private async pickSlot(deadline_ms: number): Promise<Slot> {
    for (;;) {
      const ready = this.api_slots.filter((slot) => slot.isReady());
      if (ready.length > 0) return ready[Math.floor(Math.random() * ready.length)]!;
      if (Date.now() > deadline_ms) return this.api_slots[Math.floor(Math.random() * this.api_slots.length)]!;
      await Promise.race([...this.api_slots.map((slot) => slot.whenReady()), sleep(1_000)]);
    }
  }

  /** The port of a ready API process, for a request the driver sends over a raw socket (hostile.ts). */
  async readyPort(): Promise<number> {
    const slot = await this.pickSlot(Date.now() + 30_000);
    if (slot.port === null) throw new Error(`${slot.name} has no port`);
    return slot.port;
  }

  /** Builds the request's headers anew (fresh nonce, timestamp and signature for a merchant request). */
  private headersOf(spec: RequestSpec, port: number): { method: string; path: string; headers: Record<string, string>; body: Buffer | null } {
    if (spec.kind === 'merchant') {
      const body = spec.body ?? '';
      const headers = signedHeaders({
        api_key: spec.credentials.api_key,
        signing_secret: spec.credentials.signing_secret,
        method: spec.method,
        target: spec.target,
        body,
        ...(spec.idempotency_key === undefined ? {} : { idempotency_key: spec.idempotency_key }),
      });
      return { method: spec.method, path: spec.target, headers: { host: `127.0.0.1:${port}`, ...headers }, body: body === '' ? null : Buffer.from(body) };
    }
    if (spec.kind === 'capability') {
      // The request goes byte for byte to the capability's address: its Host and path (spec, slip intake).
      const address = new URL(spec.upload_url);
      return {
        method: 'POST',
        path: `${address.pathname}${address.search}`,
        headers: {
          host: address.host,
          authorization: `Bearer ${spec.token}`,
          'idempotency-key': spec.idempotency_key,
          'content-type': spec.content_type,
        },
        body: spec.body,
      };
    }
    const headers: Record<string, string> = { host: `127.0.0.1:${port}`, authorization: `Bearer ${spec.token}` };
    if (spec.body !== undefined) headers['content-type'] = 'application/json';
    return { method: spec.method, path: spec.target, headers, body: spec.body === undefined ? null : Buffer.from(spec.body) };
  }

  private send(slot: Slot, spec: RequestSpec): Promise<RawAnswer> {
    const port = slot.port;
    if (port === null) throw new Error(`${slot.name} has no port`);
    const built = this.headersOf(spec, port);
    const headers = { ...built.headers, 'content-length': String(built.body?.length ?? 0) };
    return new Promise((resolve, reject) => {
      const request = http.request(
        { host: '127.0.0.1', port, method: built.method, path: built.path, headers, agent: this.agents.get(slot.name), timeout: ATTEMPT_TIMEOUT_MS },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', reject);
          response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) }));
        },
      );
      request.on('timeout', () => request.destroy(new Error('timeout')));
      request.on('error', reject);
      request.end(built.body ?? undefined);
    });
  }

  /** One attempt, recorded; never throws. */
  async attempt(op: string, spec: RequestSpec, slot: Slot): Promise<{ answer: RawAnswer | null; record: AttemptRecord }> {
    const running = slot.running();
    const record: AttemptRecord = {
      op,
      idempotency_key: spec.kind === 'backoffice' ? null : (spec.idempotency_key ?? null),
      slot: slot.name,
      pid: running?.pid ?? null,
      started_ms: Date.now(),
      ended_ms: 0,
      status: null,
      error: null,
      request_id: null,
      code: null,
      write: spec.kind === 'capability' || spec.method === 'POST',
      replay: false,
    };
    let answer: RawAnswer | null = null;
    try {
      answer = await this.send(slot, spec);
      record.status = answer.status;
      record.request_id = typeof answer.headers['request-id'] === 'string' ? answer.headers['request-id'] : null;
      if (answer.status >= 400) record.code = errorCodeOf(answer.body);
      record.replay = answer.headers['idempotent-replay'] === 'true';
    } catch (error) {
      record.error = (error as NodeJS.ErrnoException).code ?? (error instanceof Error ? error.message : String(error));
    }
    record.ended_ms = Date.now();
    this.attempts.push(record);
    return { answer, record };
  }

  /** Sends until acknowledged (2xx), finally refused (a 4xx that a retry cannot change), or the deadline. */
  async perform(op: string, spec: RequestSpec, policy: RetryPolicy): Promise<Outcome> {
    let attempts = 0;
    let businessRetries = 0;
    let failures = 0;
    let last: RawAnswer | null = null;
    for (;;) {
      const slot = await this.pickSlot(policy.deadline_ms);
      const { answer } = await this.attempt(op, spec, slot);
      attempts += 1;
      last = answer ?? last;
      let wait_ms: number;
      if (answer !== null && answer.status === 503 && answer.headers['retry-after'] !== undefined) {
        // Load shedding (or intake not confirmed) names its wait; the retry honours it.
        const retryAfter = Number(answer.headers['retry-after']);
        wait_ms = jitter(Math.min(MAX_RATE_LIMIT_WAIT_MS, Math.max(1, Number.isFinite(retryAfter) ? retryAfter : 1) * 1000));
      } else if (answer === null || answer.status >= 500) {
        failures += 1;
        wait_ms = jitter(Math.min(MAX_BACKOFF_MS, 100 * 2 ** Math.min(failures, 5)));
      } else if (answer.status >= 200 && answer.status < 300) {
        return this.outcome(op, spec, 'acked', answer, attempts);
      } else {
        const code = errorCodeOf(answer.body);
        if (answer.status === 429) {
          const retryAfter = Number(answer.headers['retry-after'] ?? 1);
          wait_ms = jitter(Math.min(MAX_RATE_LIMIT_WAIT_MS, Math.max(1, Number.isFinite(retryAfter) ? retryAfter : 1) * 1000));
        } else if (code === 'idempotency_in_flight') {
          wait_ms = jitter(1_000);
        } else if (code !== null && policy.business_retry_codes?.has(code) && businessRetries < (policy.max_business_retries ?? 3)) {
          businessRetries += 1;
          wait_ms = jitter(1_000);
        } else {
          return this.outcome(op, spec, 'refused', answer, attempts);
        }
      }
      if (Date.now() + wait_ms > policy.deadline_ms) {
        return this.outcome(op, spec, 'gave_up', last, attempts);
      }
      await sleep(wait_ms);
    }
  }

  private outcome(op: string, spec: RequestSpec, result: Outcome['result'], answer: RawAnswer | null, attempts: number): Outcome {
    const headers: Record<string, string> = {};
    if (answer) {
      for (const name of KEPT_HEADERS) {
        const value = answer.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
    }
    return {
      op,
      spec,
      result,
      status: answer?.status ?? null,
      code: answer && answer.status >= 400 ? errorCodeOf(answer.body) : null,
      body_text: answer?.body.toString('utf8') ?? '',
      headers,
      attempts,
    };
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
  }
}

export function newIdempotencyKey(prefix: string): string {
  return `${prefix}-${crypto.randomUUID()}`;
}
