import os from 'node:os';
import crypto from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import type { Logger } from '../platform/logger.ts';
import * as deliveryRepository from './delivery-repository.ts';
import * as fanoutRepository from './fanout-repository.ts';
import type { AttemptCompletion, ClaimedDelivery } from './delivery-repository.ts';
import type { DeliveryClient, AttemptResponse } from './http-client.ts';
import type { SigningKeyService } from './signing-keys.ts';
import { signWebhookPayload } from './signing.ts';
import type { WebhookSettings } from './settings.ts';
import { newWebhookId, nextAttemptAfter, SUCCESS_STATUSES } from './types.ts';

/**
 * The delivery worker. Each round (a "tick") it fans new outbox events out into deliveries, recovers
 * attempts whose dispatcher vanished, and claims due deliveries for one attempt each; attempts then
 * run concurrently and their answers are recorded in batches. Nothing here holds a transaction
 * across a network call: a claim, an attempt and its record are three separate steps, tied together
 * by the lease (leased_by + attempt_count) that fences a late or duplicate record.
 *
 * Isolation: a claim takes at most `endpoint_concurrency` leases for an endpoint (four times that for
 * one that answered quickly lately, one for one that did not answer), counted over every process's
 * leases; at most `endpoint_concurrency` of them send at once; each endpoint has its own connection
 * pool; every attempt has a hard deadline. A hanging endpoint therefore holds at most its concurrency
 * in leases until its first timeout, then one, and the other leases serve the healthy endpoints.
 */

/** Most deliveries one claim takes. */
const CLAIM_BATCH = 100;
/** The claim considers this many times the batch among the oldest due deliveries, for fairness. */
const CLAIM_SCAN_FACTOR = 8;
/**
 * An endpoint that answered quickly lately may be leased up to this many times its concurrency: the
 * extra leases wait in the process and start the moment a slot of their endpoint frees, so sending
 * never waits for a record and a new claim. Other endpoints get one lease per sending slot, so a slow
 * one cannot pile up waiting leases. A waiting attempt waits at most three timeouts for its slot
 * (each sending attempt ends within one and hands its slot to one waiter), which the lease covers.
 */
const LEASE_AHEAD_FACTOR = 4;
/** An answer faster than this earns its endpoint the lease-ahead for FAST_FOR_MS (clock time). */
const FAST_ANSWER_MS = 1_000;
const FAST_FOR_MS = 60_000;
/** An endpoint that gave no answer is held to one attempt at a time for this long (clock time). */
const DEGRADED_FOR_MS = 60_000;
/** A lease outlives the attempt's deadline by this much before the attempt is counted as lost. */
const LEASE_MARGIN_MS = 30_000;
const FANOUT_FEEDS_PER_ROUND = 50;
const FANOUT_EVENTS_PER_FEED = 500;
const FANOUT_MAX_ROUNDS = 20;
const RECOVER_BATCH = 200;
const RECORD_BATCH = 500;
const RECORD_RETRIES = 3;
const RUN_UNTIL_IDLE_MAX_ROUNDS = 10_000;

export interface DispatcherMetrics {
  attempt(outcome: string, duration_ms: number): void;
}

export interface DispatcherDependencies {
  database: Database;
  clock: Clock;
  logger: Logger;
  signingKeys: SigningKeyService;
  client: DeliveryClient;
  /** Disables an endpoint that answered 410, in the transaction that records that answer. */
  endpointGone: (tx: Queryable, white_label_id: string, endpoint_id: string) => Promise<void>;
  settings: WebhookSettings;
  metrics?: DispatcherMetrics;
  /** Identifies this dispatcher in leases; unique per instance. */
  worker_id?: string;
  /** The stored envelope text as its event was written (the events module opens the fields it keeps sealed). */
  openBody: (stored_text: string) => string;
}

export interface TickResult {
  fanned_out: number;
  recovered: number;
  claimed: number;
}

function defaultWorkerId(): string {
  return `webhooks:${os.hostname()}:${process.pid}:${crypto.randomBytes(4).toString('hex')}`;
}

/** What the headers of one delivery attempt name, besides its signature. */
export interface DeliveryHeaderFacts {
  event_id: string;
  delivery_id: string;
  endpoint_id: string;
  /** 1 to 11 within a round. */
  attempt: number;
  resend: boolean;
  api_version: string;
  livemode: boolean;
  event_type: string;
}

/**
 * The headers of one delivery attempt (spec, "Webhooks sent to the merchant", rule 7, plus the
 * signature): the one place they are built, for the dispatcher and for local forwarding (local-forwarding.ts).
 */
export function deliveryHeaders(facts: DeliveryHeaderFacts, signature_header: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'payment-service-webhooks/1',
    'x-pg-signature': signature_header,
    'x-pg-event-id': facts.event_id,
    'x-pg-delivery-id': facts.delivery_id,
    'x-pg-endpoint-id': facts.endpoint_id,
    'x-pg-attempt': String(facts.attempt),
    'x-pg-resend': facts.resend ? 'true' : 'false',
    'x-pg-api-version': facts.api_version,
    'x-pg-livemode': facts.livemode ? 'true' : 'false',
    'x-pg-event-type': facts.event_type,
  };
}

/** The headers of one attempt of a claimed delivery. */
export function attemptHeaders(claim: ClaimedDelivery, signature_header: string): Record<string, string> {
  return deliveryHeaders({ ...claim, attempt: claim.round_attempts }, signature_header);
}

/** What an answer means for the attempt and its delivery (spec, Events, "Delivery rules"). */
export function decideAttempt(claim: ClaimedDelivery, response: AttemptResponse, kid: string | null): AttemptCompletion {
  const base = {
    white_label_id: claim.white_label_id,
    delivery_id: claim.delivery_id,
    attempt_count: claim.attempt_count,
    endpoint_id: claim.endpoint_id,
    event_id: claim.event_id,
    round: claim.round,
    attempt: claim.round_attempts,
    resend: claim.resend,
    kid,
    http_status: response.http_status,
    started_at: claim.last_attempt_at,
    duration_ms: response.duration_ms,
  };
  const status = response.http_status;
  if (status !== null && SUCCESS_STATUSES.has(status)) {
    return { ...base, attempt_status: 'succeeded', error: null, delivery_status: 'succeeded', failure_reason: null, next_attempt_at: null };
  }
  if (status === 410) {
    return { ...base, attempt_status: 'failed', error: 'endpoint_gone', delivery_status: 'failed', failure_reason: 'endpoint_gone', next_attempt_at: null };
  }
  const error = status === null ? (response.error ?? 'network_error') : status >= 300 && status < 400 ? 'redirect_not_followed' : 'unexpected_status';
  const next = nextAttemptAfter(claim.last_attempt_at, claim.round_attempts);
  return next
    ? { ...base, attempt_status: 'failed', error, delivery_status: 'pending', failure_reason: null, next_attempt_at: next }
    : { ...base, attempt_status: 'failed', error, delivery_status: 'failed', failure_reason: 'attempts_exhausted', next_attempt_at: null };
}

export class DeliveryDispatcher {
  readonly worker_id: string;
  private readonly inFlight = new Set<Promise<void>>();
  private results: AttemptCompletion[] = [];
  private recording: Promise<void> | null = null;
  private started = false;
  private stopping = false;
  private timer: NodeJS.Timeout | null = null;
  private tickInProgress: Promise<void> | null = null;
  private tickAgain = false;
  /** True when the last claim took all it asked for: more may be due, so the next round runs at once. */
  private backlog = false;
  /** When the background loop last fanned out and recovered leases (real time, for pacing only). */
  private lastSweepAt = Number.NEGATIVE_INFINITY;
  /**
   * Endpoints whose last attempt got no answer (timeout, refused, TLS failure), with the clock time
   * until which they get one slot instead of `endpoint_concurrency`: a dead endpoint then ties up
   * one slot of this process, however many dead endpoints there are. Any answer lifts it.
   */
  private readonly degraded = new Map<string, number>();
  /** Endpoints that answered quickly lately, with the clock time until which they get the lease-ahead. */
  private readonly fast = new Map<string, number>();
  /** Per endpoint: attempts sending now, and the leased ones waiting for a slot (in claim order). */
  private readonly slots = new Map<string, { sending: number; waiting: (() => void)[] }>();

  constructor(private readonly dependencies: DispatcherDependencies) {
    this.worker_id = dependencies.worker_id ?? defaultWorkerId();
  }

  /** Starts the background loop (the worker role). */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.stopping = false;
    this.schedule(0);
  }

  /** Runs a round at once instead of after the poll interval. */
  wake(): void {
    if (!this.started || this.stopping) return;
    if (this.tickInProgress) {
      this.tickAgain = true;
      return;
    }
    this.schedule(0);
  }

  /**
   * Stops claiming, lets the attempts in flight finish (each is bounded by the timeout) and records
   * them, then closes the connections. Nothing is lost if the process dies instead: leases run out
   * and the attempts are recovered as lost.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.tickInProgress) await this.tickInProgress;
    await this.settle();
    this.started = false;
    this.dependencies.client.close();
  }

  /** Waits for the attempts in flight and for their records. */
  async settle(): Promise<void> {
    for (let wait = 0; wait < 1000 && (this.inFlight.size > 0 || this.recording || this.results.length > 0); wait += 1) {
      await Promise.allSettled([...this.inFlight]);
      if (this.results.length > 0 && !this.recording) this.scheduleRecord();
      if (this.recording) await this.recording;
    }
  }

  /**
   * For tests and one-shot runs: rounds until nothing is left to fan out or due at the clock's now,
   * waiting for every attempt of a round before the next. Returns how many attempts were made.
   */
  async runUntilIdle(): Promise<number> {
    let attempts = 0;
    for (let round = 0; round < RUN_UNTIL_IDLE_MAX_ROUNDS; round += 1) {
      const result = await this.tick();
      await this.settle();
      attempts += result.claimed;
      if (result.claimed === 0 && result.fanned_out === 0 && result.recovered === 0) break;
    }
    return attempts;
  }

  /**
   * One round: fan out, recover lost attempts, claim and start attempts (without waiting for them).
   * The background loop runs a round whenever recorded answers free slots, so under load it paces the
   * two sweeps (fan-out, recovery) to one per poll interval; `sweep: 'always'` (tests) forces them.
   */
  async tick(options: { sweep?: 'always' | 'paced' } = {}): Promise<TickResult> {
    let fanned_out = 0;
    let recovered = 0;
    const sweepDue = performance.now() - this.lastSweepAt >= this.dependencies.settings.poll_interval_ms;
    if (options.sweep !== 'paced' || sweepDue) {
      this.lastSweepAt = performance.now();
      fanned_out = await this.fanOut();
      recovered = await deliveryRepository.recoverExpiredLeases(this.dependencies.database, this.dependencies.clock.now(), RECOVER_BATCH);
    }
    const free = this.dependencies.settings.max_in_flight - this.inFlight.size;
    let claimed = 0;
    if (free > 0 && !this.stopping) {
      const limit = Math.min(free, CLAIM_BATCH);
      const claims = await deliveryRepository.claimDeliveries(this.dependencies.database, {
        now: this.dependencies.clock.now(),
        limit,
        scan: limit * CLAIM_SCAN_FACTOR,
        per_endpoint: this.dependencies.settings.endpoint_concurrency,
        degraded_endpoint_ids: this.current(this.degraded),
        fast_endpoint_ids: this.current(this.fast),
        fast_per_endpoint: this.dependencies.settings.endpoint_concurrency * LEASE_AHEAD_FACTOR,
        worker_id: this.worker_id,
        // A leased attempt may wait one timeout for its slot, then send for at most another.
        lease_ms: this.dependencies.settings.timeout_ms * LEASE_AHEAD_FACTOR + LEASE_MARGIN_MS,
      });
      claimed = claims.length;
      this.backlog = claims.length === limit;
      for (const claim of claims) this.track(this.attempt(claim));
    }
    return { fanned_out, recovered, claimed };
  }

  /**
   * Turns new outbox events into deliveries, feed by feed, each feed in its own short transaction
   * under its cursor's row lock (SKIP LOCKED: another process may take other feeds meanwhile).
   * Inserting is idempotent per (event, endpoint), so a repeated fan-out creates nothing twice.
   */
  async fanOut(): Promise<number> {
    const { database, clock } = this.dependencies;
    let created = 0;
    for (let round = 0; round < FANOUT_MAX_ROUNDS; round += 1) {
      const feeds = await fanoutRepository.feedsBehind(database, FANOUT_FEEDS_PER_ROUND);
      let progressed = false;
      for (const feed of feeds) {
        const inserted = await database.transaction(async (tx) => {
          const cursor = await fanoutRepository.lockFeed(tx, feed);
          if (!cursor || cursor.head <= cursor.last_sequence) return null;
          const upto = Math.min(cursor.head, cursor.last_sequence + FANOUT_EVENTS_PER_FEED);
          const now = clock.now();
          const pairs = await fanoutRepository.fanoutPairs(tx, feed, cursor.last_sequence, upto);
          const count = await fanoutRepository.insertDeliveries(
            tx,
            feed,
            pairs.map((pair) => ({ ...pair, delivery_id: newWebhookId('delivery') })),
            false,
            now,
          );
          await fanoutRepository.advanceFeedCursor(tx, feed, upto, now);
          return count;
        });
        if (inserted !== null) {
          progressed = true;
          created += inserted;
        }
      }
      if (!progressed) break;
    }
    return created;
  }

  /** The endpoints of a marking map still marked now (expired marks are dropped). */
  private current(marks: Map<string, number>): string[] {
    const now = this.dependencies.clock.now().getTime();
    for (const [endpoint_id, until] of marks) if (until <= now) marks.delete(endpoint_id);
    return [...marks.keys()];
  }

  private schedule(delay_ms: number): void {
    if (!this.started || this.stopping) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.loop();
    }, delay_ms);
  }

  private loop(): void {
    if (this.tickInProgress) {
      this.tickAgain = true;
      return;
    }
    this.tickAgain = false;
    this.tickInProgress = this.tick({ sweep: 'paced' })
      .then((result) => {
        // New deliveries from the fan-out may be due at once even when this claim found none.
        if (result.fanned_out > 0) this.tickAgain = true;
      })
      .catch((error: unknown) => {
        // The database may be restarting; the next round tries again after the interval.
        this.dependencies.logger.error({ err: error, worker_id: this.worker_id }, 'webhook dispatch round failed');
        this.backlog = false;
      })
      .finally(() => {
        this.tickInProgress = null;
        this.schedule(this.tickAgain || this.backlog ? 0 : this.dependencies.settings.poll_interval_ms);
      });
  }

  private track(work: Promise<void>): void {
    this.inFlight.add(work);
    void work.finally(() => this.inFlight.delete(work));
  }

  /** Waits for one of the endpoint's `endpoint_concurrency` sending slots. */
  private async acquireSlot(endpoint_id: string): Promise<void> {
    let slot = this.slots.get(endpoint_id);
    if (!slot) {
      slot = { sending: 0, waiting: [] };
      this.slots.set(endpoint_id, slot);
    }
    if (slot.sending < this.dependencies.settings.endpoint_concurrency) {
      slot.sending += 1;
      return;
    }
    const waiting = slot.waiting;
    await new Promise<void>((resolve) => waiting.push(resolve));
  }

  /** Hands the slot to the next waiting attempt of the endpoint, or frees it. */
  private releaseSlot(endpoint_id: string): void {
    const slot = this.slots.get(endpoint_id);
    if (!slot) return;
    const next = slot.waiting.shift();
    if (next) {
      next();
      return;
    }
    slot.sending -= 1;
    if (slot.sending === 0) this.slots.delete(endpoint_id);
  }

  /** One attempt: wait for a slot, sign at send time (t is now), send, and queue the record. Never rejects. */
  private async attempt(claim: ClaimedDelivery): Promise<void> {
    const { clock, client, signingKeys, logger, metrics } = this.dependencies;
    await this.acquireSlot(claim.endpoint_id);
    let completion: AttemptCompletion;
    try {
      const body = Buffer.from(this.dependencies.openBody(claim.body), 'utf8');
      // The delivery's environment picks the key set (live, or its brand's sandbox set): a sandbox
      // event is never signed by a live key, nor the other way round.
      const signer = await signingKeys.signer({ white_label_id: claim.white_label_id, livemode: claim.livemode });
      const t = Math.floor(clock.now().getTime() / 1000);
      const signature = signWebhookPayload({ private_key: signer.private_key, kid: signer.kid, t, event_id: claim.event_id, body });
      const response = await client.send({
        endpoint_id: claim.endpoint_id,
        url: claim.url,
        livemode: claim.livemode,
        headers: attemptHeaders(claim, signature.header),
        body,
      });
      completion = decideAttempt(claim, response, signer.kid);
      if (response.http_status === null) {
        this.degraded.set(claim.endpoint_id, clock.now().getTime() + DEGRADED_FOR_MS);
        this.fast.delete(claim.endpoint_id);
      } else {
        this.degraded.delete(claim.endpoint_id);
        if (response.duration_ms < FAST_ANSWER_MS) this.fast.set(claim.endpoint_id, clock.now().getTime() + FAST_FOR_MS);
        else this.fast.delete(claim.endpoint_id);
      }
    } catch (error) {
      // Only a failure before sending lands here (no signing key readable, say): the attempt counts
      // as failed without reaching the receiver, and the schedule goes on.
      logger.error({ err: error, delivery_id: claim.delivery_id }, 'webhook attempt could not be prepared');
      completion = decideAttempt(claim, { http_status: null, error: 'internal_error', duration_ms: 0 }, null);
    } finally {
      this.releaseSlot(claim.endpoint_id);
    }
    metrics?.attempt(completion.error ?? 'succeeded', completion.duration_ms);
    this.results.push(completion);
    this.scheduleRecord();
  }

  private scheduleRecord(): void {
    if (this.recording) return;
    this.recording = this.recordLoop().finally(() => {
      this.recording = null;
      if (this.results.length > 0) this.scheduleRecord();
    });
  }

  /**
   * A recorded answer releases its lease, which is what frees its endpoint's slot in the claim, so
   * the loop claims again right after each write rather than after the poll interval.
   */

  /** Records answers in batches; answers arriving during a write wait for the next batch. */
  private async recordLoop(): Promise<void> {
    while (this.results.length > 0) {
      const batch = this.results.splice(0, RECORD_BATCH);
      for (let attempt = 1; ; attempt += 1) {
        try {
          await this.record(batch);
          this.wake();
          break;
        } catch (error) {
          if (attempt >= RECORD_RETRIES) {
            // The leases run out and these attempts are recovered as lost, then retried.
            this.dependencies.logger.error({ err: error, count: batch.length }, 'recording webhook attempts failed; they will be recovered as lost');
            break;
          }
          await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
        }
      }
    }
  }

  private async record(batch: AttemptCompletion[]): Promise<void> {
    const { database, clock, endpointGone } = this.dependencies;
    const gone = batch.filter((item) => item.failure_reason === 'endpoint_gone');
    if (gone.length === 0) {
      await deliveryRepository.completeAttempts(database, this.worker_id, clock.now(), batch);
      return;
    }
    // The 410 and the disabling of its endpoint (with its event) commit together or not at all.
    await database.transaction(async (tx) => {
      const recorded = new Set(await deliveryRepository.completeAttempts(tx, this.worker_id, clock.now(), batch));
      for (const item of gone) {
        if (recorded.has(item.delivery_id)) await endpointGone(tx, item.white_label_id, item.endpoint_id);
      }
    });
  }
}
