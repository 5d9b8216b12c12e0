import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import type { Logger } from '../platform/logger.ts';
import { DAY_MS, HOUR_MS } from '../platform/time.ts';
import { enqueueJob, type JobHandler } from '../jobs/index.ts';
import type { BlobStore } from './evidence-store.ts';
import * as repository from './repository.ts';

/**
 * The evidence retention (docs/decisions/slips.md, "Evidence retention"): slip images older than
 * EVIDENCE_RETENTION_DAYS are purged by a durable job, in bounded batches, except the images of an order
 * that has an open review, a claim still to decide or a dispute not resolved.
 *
 * A purge keeps the receipt and its manifest (media type, size, SHA-256, what the checks concluded) and
 * deletes the image: in one transaction, which first asks which of the batch's orders are held by an open
 * case, the receipts are marked (`evidence_purged_at`), their wrapped data keys erased, and the PostgreSQL
 * store's blobs deleted. A file or an object is deleted after that transaction commits, never inside it;
 * the receipt names its store until the bytes are gone, so a run that stopped in between finishes the
 * deletion on the next run. With the data key erased first, nothing left behind anywhere can be opened.
 *
 * The job runs at the top of every hour. Each run first schedules the next (a job of its own key, so that
 * a run that fails still leaves the chain going), and every worker's housekeeping schedules it too when it
 * is missing; jobs are keyed by the hour they run at, so any number of workers make one job per hour.
 */

export const EVIDENCE_RETENTION_TASK = 'slips.evidence_retention';
/** Receipts looked at per batch, and batches per run: a run is bounded, and a large backlog continues at once. */
const PURGE_BATCH = 200;
const MAXIMUM_BATCHES_PER_RUN = 25;
/** How many files or objects are deleted at once after a batch's purge has committed. */
const PARALLEL_DELETIONS = 8;

export interface OrderReference {
  white_label_id: string;
  deposit_id: string;
}

/** Which of these orders have an open review, a claim still to decide or a dispute not resolved. */
export type EvidenceHolds = (db: Queryable, orders: readonly OrderReference[]) => Promise<OrderReference[]>;

export interface EvidenceRetentionDependencies {
  database: Database;
  clock: Clock;
  logger: Logger;
  blobs: BlobStore;
  /** Days an image is kept after its receipt; null keeps every image (the default). */
  retention_days: number | null;
  holds: EvidenceHolds;
}

/** What one run did: counts only, never an identifier of an order or a person. */
export interface RetentionRound {
  examined: number;
  purged: number;
  kept_for_open_cases: number;
  blobs_deleted: number;
  /** False when the run stopped at its bound with more to do; a continuation is scheduled at once. */
  complete: boolean;
}

function orderKey(order: OrderReference): string {
  return `${order.white_label_id}\u0000${order.deposit_id}`;
}

/** The top of the hour after `now`: the run times every worker agrees on. */
function nextHour(now: Date): Date {
  return new Date((Math.floor(now.getTime() / HOUR_MS) + 1) * HOUR_MS);
}

export class EvidenceRetention {
  constructor(private readonly deps: EvidenceRetentionDependencies) {}

  jobHandlers(): Record<string, JobHandler> {
    return {
      [EVIDENCE_RETENTION_TASK]: async () => {
        // A retention switched off since the job was scheduled ends the chain here.
        if (this.deps.retention_days === null) return;
        await this.ensureScheduled();
        const round = await this.run();
        if (!round.complete) await this.schedule(this.deps.clock.now(), 'continue');
      },
    };
  }

  /** Schedules the next hour's run unless it is scheduled already (a no-op with the retention off). */
  async ensureScheduled(): Promise<void> {
    if (this.deps.retention_days === null) return;
    await this.schedule(nextHour(this.deps.clock.now()), 'hour');
  }

  private async schedule(run_at: Date, kind: 'hour' | 'continue'): Promise<void> {
    await enqueueJob(this.deps.database, this.deps.clock, {
      task: EVIDENCE_RETENTION_TASK,
      payload: {},
      run_at,
      job_key: `${EVIDENCE_RETENTION_TASK}:${kind}:${run_at.toISOString()}`,
      max_attempts: 5,
    });
  }

  /** One bounded run: purges what is due, then deletes the bytes purged receipts still have in a store. */
  async run(): Promise<RetentionRound> {
    const round: RetentionRound = { examined: 0, purged: 0, kept_for_open_cases: 0, blobs_deleted: 0, complete: true };
    if (this.deps.retention_days === null) return round;
    const now = this.deps.clock.now();
    const before = new Date(now.getTime() - this.deps.retention_days * DAY_MS);
    let after: repository.RetainedEvidence | null = null;
    for (let batch = 0; ; batch += 1) {
      if (batch === MAXIMUM_BATCHES_PER_RUN) {
        round.complete = false;
        break;
      }
      const candidates = await repository.listEvidenceToPurge(this.deps.database, { before, after, limit: PURGE_BATCH });
      if (candidates.length === 0) break;
      after = candidates[candidates.length - 1] ?? null;
      round.examined += candidates.length;
      const purged = await this.purgeBatch(candidates, now);
      round.purged += purged;
      round.kept_for_open_cases += candidates.length - purged;
      if (candidates.length < PURGE_BATCH) break;
    }
    round.blobs_deleted += await this.deleteStoredBytes();
    this.deps.logger.info({ retention_days: this.deps.retention_days, ...round }, 'slip evidence retention run');
    return round;
  }

  /**
   * Marks the batch's receipts purged, except those of orders an open case holds, asked in the same
   * transaction; returns how many were marked.
   */
  private async purgeBatch(candidates: readonly repository.RetainedEvidence[], now: Date): Promise<number> {
    return this.deps.database.transaction(async (tx) => {
      const orders = new Map(candidates.map((candidate) => [orderKey(candidate), { white_label_id: candidate.white_label_id, deposit_id: candidate.deposit_id }]));
      const held = new Set((await this.deps.holds(tx, [...orders.values()])).map(orderKey));
      const free = candidates.filter((candidate) => !held.has(orderKey(candidate)));
      return repository.markEvidencePurged(tx, free, now);
    });
  }

  /**
   * Deletes from the configured file or object store the bytes of receipts already purged, in bounded
   * batches; each deletion is recorded once it succeeded. A failure stops the run (the job retries), after
   * recording the deletions that did succeed.
   */
  private async deleteStoredBytes(): Promise<number> {
    if (this.deps.blobs.writes === 'in_transaction') return 0;
    let deleted = 0;
    for (let batch = 0; batch < MAXIMUM_BATCHES_PER_RUN; batch += 1) {
      const purged = await repository.listPurgedBlobsInStore(this.deps.database, this.deps.blobs.kind, PURGE_BATCH);
      if (purged.length === 0) break;
      const removed: typeof purged = [];
      let failure: unknown = null;
      for (let start = 0; start < purged.length && failure === null; start += PARALLEL_DELETIONS) {
        const slice = purged.slice(start, start + PARALLEL_DELETIONS);
        const outcomes = await Promise.allSettled(slice.map((receipt) => this.deps.blobs.remove({ white_label_id: receipt.white_label_id, blob_key: receipt.receipt_id })));
        outcomes.forEach((outcome, index) => {
          if (outcome.status === 'fulfilled') removed.push(slice[index]!);
          else failure ??= outcome.reason;
        });
      }
      await repository.clearPurgedBlobStore(this.deps.database, removed);
      deleted += removed.length;
      if (failure !== null) throw failure;
      if (purged.length < PURGE_BATCH) break;
    }
    return deleted;
  }
}
