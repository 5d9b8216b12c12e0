import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { ApiError, renderError } from '../platform/errors.ts';
import { invariant } from '../platform/assert.ts';
import { SecretBox } from '../platform/crypto.ts';
import { DAY_MS } from '../platform/time.ts';
import * as repository from './repository.ts';
import type { IdempotentExecution, StoredResponse } from '../http/ports.ts';
import type { ReadPart } from '../platform/read-part.ts';

/**
 * Idempotent execution of a write (spec, Common request rules 2 and 4).
 *
 * An `ApiError` with `commit_writes` is the one exception to "an error changes nothing": its writes
 * commit (the side effect its answer announces), and it is still not stored as the key's answer.
 *
 * The handler runs in one transaction with the record of its response, so a successful response is stored
 * if and only if its effects committed. An error changes nothing but the key: an error answer is stored too,
 * after its transaction rolled back, unless a retry of the same request may succeed (the catalogue's
 * `retryable`: a 429, a 503, 402 `insufficient_balance`, a state conflict to re-read), since storing it would
 * replay the refusal to the retry it invites (spec, Common request rules 2: "A 429 does not consume the key";
 * docs/decisions/idempotency.md).
 *
 * Concurrency: a first request still running makes a second one with the same key answer 409
 * `idempotency_in_flight`. Within one process an in-memory set sees it without a query (on PGlite the
 * transactions are serialised, so this set is the only place it can be seen); across processes on
 * PostgreSQL a transaction-scoped advisory lock does.
 */
export const IDEMPOTENCY_RETENTION_MS = 7 * DAY_MS;

/**
 * Stored answers are sealed (AES-256-GCM under the master key) with the record's scope as their purpose:
 * an answer may carry a slip capability token or a PromptPay payload (which holds a receiver's full
 * account number), and such values never rest in plain text. The scope in the purpose keeps a sealed
 * answer from being replayed under another merchant's key. Answers stored before sealing are plain JSON,
 * which never starts with a sealed format's `v1.` or `v2.`, and are still replayed until they expire.
 */
export function responsePurpose(scope: repository.IdempotencyScope): string {
  return `idempotency.response_body:${scope.white_label_id}:${scope.merchant_id}:${scope.livemode}:${scope.idempotency_key}`;
}

/**
 * Whether an error answer is stored as the key's answer: a refusal no retry of the same request can turn
 * (validation, a business rule), not one a retry may get past, nor one that keeps its writes (its answer
 * announces a side effect, and the retry after it runs anew), nor the key's own answers.
 */
function consumesKey(error: ApiError): boolean {
  return !error.retryable && !error.commit_writes && error.code !== 'idempotency_key_reused' && error.code !== 'idempotency_in_flight';
}

export class IdempotencyService implements IdempotentExecution {
  private readonly inFlight = new Set<string>();

  constructor(
    private readonly database: Database,
    private readonly clock: Clock,
    private readonly secretBox: SecretBox,
  ) {}

  private openStored(scope: repository.IdempotencyScope, stored: string): string {
    return SecretBox.isSealed(stored) ? this.secretBox.open(stored, responsePurpose(scope)) : stored;
  }

  async execute(
    scope: repository.IdempotencyScope,
    input: { fingerprint: string; request_id: string },
    handler: (tx: Queryable, answers: readonly unknown[]) => Promise<{ status: number; body: unknown; headers?: Record<string, string> }>,
    /** The handler's first reads (a planned command's, src/platform/read-part.ts), carried by the key's statement and handed to it. */
    reads: readonly ReadPart<unknown>[] = [],
  ): Promise<StoredResponse> {
    const lockText = `${scope.white_label_id}|${scope.merchant_id}|${scope.livemode}|${scope.idempotency_key}`;
    if (this.inFlight.has(lockText)) throw new ApiError('idempotency_in_flight', { retry_after_seconds: 1 });
    this.inFlight.add(lockText);
    // The handler's own refusal, if it refused: the key may have to keep it once its transaction rolled back.
    const handled: { refusal: ApiError | null } = { refusal: null };
    try {
      const outcome = await this.database.transaction(async (tx): Promise<StoredResponse | ApiError> => {
        const now = this.clock.now();
        const { locked, record: existing, answers } = await repository.lockAndFindRecord(tx, lockText, scope, now, reads);
        if (!locked) throw new ApiError('idempotency_in_flight', { retry_after_seconds: 1 });
        if (existing) {
          if (existing.request_fingerprint !== input.fingerprint) {
            throw new ApiError('idempotency_key_reused', { details: { original_request_id: existing.request_id } });
          }
          return { status: existing.response_status, body_text: this.openStored(scope, existing.response_body), headers: existing.response_headers, replayed: true };
        }
        let outcome: { status: number; body: unknown; headers?: Record<string, string> };
        try {
          outcome = await handler(tx, answers);
        } catch (error) {
          // An error that keeps its writes ends the transaction with a commit; it is thrown after.
          if (error instanceof ApiError && error.commit_writes) return error;
          if (error instanceof ApiError) handled.refusal = error;
          throw error;
        }
        const bodyText = JSON.stringify(outcome.body);
        const headers = outcome.headers ?? {};
        if (outcome.status >= 200 && outcome.status < 300) {
          // A first request that committed between the lock statement's snapshot and its lock leaves a
          // live record here: this execution must not commit, and a retry will replay the first.
          await repository.insertRecord(tx, this.recordOf(scope, input, { status: outcome.status, body_text: bodyText, headers }, now), () => new ApiError('idempotency_in_flight', { retry_after_seconds: 1 }));
        }
        return { status: outcome.status, body_text: bodyText, headers, replayed: false };
      });
      if (outcome instanceof ApiError) throw outcome;
      return outcome;
    } catch (error) {
      if (handled.refusal !== null && error === handled.refusal && consumesKey(handled.refusal)) await this.storeRefusal(scope, input, lockText, handled.refusal);
      throw error;
    } finally {
      this.inFlight.delete(lockText);
    }
  }

  /**
   * Stores an error answer as the key's, in a transaction of its own: the handler's rolled back with the error,
   * and with it everything the request wrote. A request with the same key that another process ran between the
   * two transactions keeps the key: this answer is then not stored, and a retry replays that one.
   */
  private async storeRefusal(scope: repository.IdempotencyScope, input: { fingerprint: string; request_id: string }, lockText: string, refusal: ApiError): Promise<void> {
    // Backed by the stored status's rule (migration 0028): every refusal no retry can turn is a client error.
    invariant(refusal.status >= 400 && refusal.status <= 499 && refusal.status !== 429, 'a stored refusal is a client error other than 429');
    const bodyText = JSON.stringify(renderError(refusal, input.request_id));
    const taken = new Error('the key was taken meanwhile');
    try {
      await this.database.transaction(async (tx) => {
        const now = this.clock.now();
        const { locked, record } = await repository.lockAndFindRecord(tx, lockText, scope, now);
        if (!locked || record !== null) return;
        await repository.insertRecord(tx, this.recordOf(scope, input, { status: refusal.status, body_text: bodyText, headers: {} }, now), () => taken);
      });
    } catch (error) {
      if (error !== taken) throw error;
    }
  }

  private recordOf(
    scope: repository.IdempotencyScope,
    input: { fingerprint: string; request_id: string },
    response: { status: number; body_text: string; headers: Record<string, string> },
    now: Date,
  ): repository.IdempotencyRecordRow {
    return {
      ...scope,
      request_fingerprint: input.fingerprint,
      request_id: input.request_id,
      response_status: response.status,
      response_body: this.secretBox.seal(response.body_text, responsePurpose(scope)),
      response_headers: response.headers,
      created_at: now,
      expires_at: new Date(now.getTime() + IDEMPOTENCY_RETENTION_MS),
    };
  }

  purgeExpired(limit: number): Promise<number> {
    return repository.purgeExpiredRecords(this.database, this.clock.now(), limit);
  }
}
