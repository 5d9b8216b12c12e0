import type { ServerResponse } from 'node:http';
import { Writable, type Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { invariant } from '../platform/assert.ts';

/**
 * Request bodies are read here, and only once the route's pipeline has decided that the caller may send
 * one (its key, token or session checked from the headers). Fastify hands every body over unread (the
 * content-type parser in server.ts), so that a request that will be refused is refused before its body
 * arrives, and every byte that is read is read under three bounds:
 *
 * - a size: a declared `Content-Length` above the route's limit is refused before anything is read, and a
 *   chunked body is cut at the limit;
 * - time: the whole body within the route's deadline, and, while it is incomplete, at least
 *   `min_bytes_per_window` in every window, so that a client trickling a byte every few seconds is cut
 *   off long before the deadline;
 * - memory: buffered bodies reserve their declared length (or the route's limit when chunked) from one
 *   process-wide budget, and a body that does not fit is refused at once (503, retryable) instead of
 *   queueing in memory. Streamed bodies (slip uploads) are bounded by their caller's own gate instead.
 *
 * A body that is not read whole leaves bytes on the connection that belong to no request, so the answer
 * to such a request closes the connection (server.ts, onSend).
 */

export interface BodyLimits {
  /** The most bytes the body may have. */
  max_bytes: number;
  /** The whole body must have arrived this long after reading began. */
  deadline_ms: number;
}

export interface BodyReadingSettings {
  /** While a body is incomplete, at least this many bytes must arrive in every window of `window_ms`. */
  min_bytes_per_window: number;
  window_ms: number;
  /** Bytes of buffered bodies this process holds at once, reserved by declared length. */
  buffer_budget_bytes: number;
}

export type BodyRefusalReason = 'too_large' | 'deadline' | 'too_slow' | 'aborted' | 'budget_exhausted';

/** Why a body was not read whole; the pipeline answers it from the catalogue (server.ts). */
export class BodyRefusal extends Error {
  override name = 'BodyRefusal';

  constructor(
    readonly reason: BodyRefusalReason,
    readonly max_bytes: number,
  ) {
    super(`request body refused: ${reason}`);
  }
}

/** What the reader reports, for metrics. */
export interface BodyReadingObserver {
  refused(reason: BodyRefusalReason): void;
  buffered(bytes: number): void;
}

const EMPTY = Buffer.alloc(0);

/** The unread body Fastify handed over, or null for a request without one. */
function bodyStream(request: FastifyRequest): Readable | null {
  const body = request.body as unknown;
  if (body !== null && typeof body === 'object' && typeof (body as Readable).on === 'function' && typeof (body as Readable).pause === 'function') {
    return body as Readable;
  }
  return null;
}

/** The declared `Content-Length`, or null for a chunked body. Node's parser has already checked its form. */
function declaredLength(request: FastifyRequest): number | null {
  const header = request.headers['content-length'];
  if (typeof header !== 'string' || request.headers['transfer-encoding'] !== undefined) return null;
  const length = Number(header);
  return Number.isSafeInteger(length) && length >= 0 ? length : null;
}

/** True when the request came with a body (a non-zero length, or chunked), read or not. */
export function requestHasBody(request: FastifyRequest): boolean {
  const declared = declaredLength(request);
  return declared === null ? request.headers['transfer-encoding'] !== undefined : declared > 0;
}

/**
 * A client that sent `Expect: 100-continue` waits for this before it sends the body. Node would have sent
 * it on arrival; the server's `checkContinue` listener (server.ts) leaves it to the moment reading begins,
 * so that a refused request's body is never sent at all.
 */
function allowBody(request: FastifyRequest, reply: FastifyReply): void {
  const expect = request.headers.expect;
  const response = reply.raw as ServerResponse & { _sent100?: boolean };
  if (typeof expect === 'string' && expect.toLowerCase() === '100-continue' && !response._sent100 && !response.headersSent && typeof response.writeContinue === 'function') {
    response.writeContinue();
  }
}

interface RateFloor {
  min_bytes_per_window: number;
  window_ms: number;
}

/**
 * Moves the body's bytes into `sink` under the limits, with the sink's back-pressure; resolves with the
 * byte count once the body ended (and `sink.end()` was called), or rejects with a `BodyRefusal` (or the
 * sink's own error). Either way every listener and timer is gone when it settles, and a body that was
 * refused stays paused and unread.
 */
export function pumpBody(source: Readable, limits: BodyLimits, floor: RateFloor, sink: Writable): Promise<number> {
  if (source.readableEnded) {
    sink.end();
    return Promise.resolve(0);
  }
  // A client that went away while the request waited (for a slot, for the database) left a destroyed
  // stream, which will emit nothing more: waiting for its events would hold the caller until a deadline.
  if (source.destroyed) return Promise.reject(new BodyRefusal('aborted', limits.max_bytes));
  return new Promise<number>((resolve, reject) => {
    let received = 0;
    let receivedAtWindowStart = 0;
    let pausedForSink = false;
    let settled = false;
    const deadline = setTimeout(() => stop(new BodyRefusal('deadline', limits.max_bytes)), limits.deadline_ms);
    // A window in which the sink held the body back does not count against the client.
    const window = setInterval(() => {
      if (!pausedForSink && received - receivedAtWindowStart < floor.min_bytes_per_window) stop(new BodyRefusal('too_slow', limits.max_bytes));
      receivedAtWindowStart = received;
    }, floor.window_ms);
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limits.max_bytes) return stop(new BodyRefusal('too_large', limits.max_bytes));
      if (!sink.write(chunk)) {
        pausedForSink = true;
        source.pause();
      }
    };
    const onDrain = () => {
      pausedForSink = false;
      if (!settled) source.resume();
    };
    const onEnd = () => {
      if (settled) return;
      settled = true;
      cleanup();
      sink.end();
      resolve(received);
    };
    const onAborted = () => stop(new BodyRefusal('aborted', limits.max_bytes));
    const onSinkError = (error: Error) => stop(error);
    function cleanup(): void {
      clearTimeout(deadline);
      clearInterval(window);
      source.off('data', onData).off('end', onEnd).off('error', onAborted).off('close', onAborted).off('aborted', onAborted);
      sink.off('drain', onDrain).off('error', onSinkError);
    }
    function stop(error: Error): void {
      if (settled) return;
      settled = true;
      cleanup();
      source.pause();
      // An error listener stays on the source: a late socket error must never become an uncaught one.
      source.on('error', () => undefined);
      reject(error);
    }
    deadline.unref();
    window.unref();
    source.on('data', onData).on('end', onEnd).on('error', onAborted).on('close', onAborted).on('aborted', onAborted);
    sink.on('drain', onDrain).on('error', onSinkError);
  });
}

/** A sink that keeps the chunks it is given, for a body read into memory. */
export function chunkCollector(): { sink: Writable; bytes: () => Buffer } {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      callback();
    },
  });
  return { sink, bytes: () => (chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)) };
}

export class RequestBodies {
  private bufferedBytes = 0;

  constructor(
    private readonly settings: BodyReadingSettings,
    private readonly observer: BodyReadingObserver,
  ) {
    invariant(settings.buffer_budget_bytes > 0 && settings.window_ms > 0, 'body reading has a budget and a rate window');
  }

  /** Bytes reserved by buffered bodies being read now (for tests and the gauge). */
  get reservedBytes(): number {
    return this.bufferedBytes;
  }

  /**
   * The body as bytes (empty when the request has none), read under `limits` and the process's budget.
   * Throws a `BodyRefusal`.
   */
  async buffer(request: FastifyRequest, reply: FastifyReply, limits: BodyLimits): Promise<Buffer> {
    const source = bodyStream(request);
    if (source === null) return EMPTY;
    const declared = this.admitLength(request, limits);
    const reservation = declared ?? limits.max_bytes;
    if (this.bufferedBytes + reservation > this.settings.buffer_budget_bytes) throw this.refusal('budget_exhausted', limits);
    this.bufferedBytes += reservation;
    this.observer.buffered(this.bufferedBytes);
    try {
      const collector = chunkCollector();
      await this.pump(request, reply, source, limits, collector.sink);
      return collector.bytes();
    } finally {
      this.bufferedBytes -= reservation;
      this.observer.buffered(this.bufferedBytes);
    }
  }

  /**
   * Streams the body into `sink` under `limits`, outside the buffer budget: the caller bounds how many
   * such bodies are read at once (slip intake's gate). Resolves with the byte count (0 without a body,
   * after ending the sink). Throws a `BodyRefusal`, or the sink's own error.
   */
  async stream(request: FastifyRequest, reply: FastifyReply, limits: BodyLimits, sink: Writable): Promise<number> {
    const source = bodyStream(request);
    if (source === null) {
      sink.end();
      return 0;
    }
    this.admitLength(request, limits);
    return this.pump(request, reply, source, limits, sink);
  }

  private admitLength(request: FastifyRequest, limits: BodyLimits): number | null {
    const declared = declaredLength(request);
    if (declared !== null && declared > limits.max_bytes) throw this.refusal('too_large', limits);
    return declared;
  }

  private async pump(request: FastifyRequest, reply: FastifyReply, source: Readable, limits: BodyLimits, sink: Writable): Promise<number> {
    allowBody(request, reply);
    try {
      return await pumpBody(source, limits, this.settings, sink);
    } catch (error) {
      if (error instanceof BodyRefusal) this.observer.refused(error.reason);
      throw error;
    }
  }

  private refusal(reason: BodyRefusalReason, limits: BodyLimits): BodyRefusal {
    this.observer.refused(reason);
    return new BodyRefusal(reason, limits.max_bytes);
  }
}
