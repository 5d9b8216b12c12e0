import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import type { SecretBox } from '../platform/crypto.ts';
import type { Logger } from '../platform/logger.ts';
import { InvariantViolation, invariant } from '../platform/assert.ts';
import { sha256Hex } from '../platform/crypto.ts';
import { ApiError, type Result } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { formatTimestamp } from '../platform/time.ts';
import { enqueueJob } from '../jobs/index.ts';
import type { ReadPart } from '../platform/read-part.ts';
import type { ConcurrencyGate, GateRefusal } from '../platform/concurrency-gate.ts';
import type { IdempotencyService } from '../idempotency/service.ts';
import type { DepositService } from '../deposits/service.ts';
import type { ClaimView, LateSlipClaimEvidence } from '../deposits/types.ts';
import type { SlipTokenClaims } from '../slip-capability/capability.ts';
import type { BlobAddress, BlobStore, EvidenceCipher, SealedEvidence } from './evidence-store.ts';
import { evidenceFingerprint, submittedFields, type SubmittedEvidence } from './evidence-body.ts';
import * as repository from './repository.ts';
import type { SlipImageMediaType, SlipReceiptRow, SlipReceiptView, SubmittedFields } from './types.ts';

/**
 * Slip intake and the receipts it keeps (spec, POST /v1/pay/deposits/{id}/slip). An upload is durable
 * before its 202: in one transaction the evidence is sealed and stored through the blob port, its
 * manifest (sha256, size, media type, fingerprint) is written on the receipt, the blob is read back,
 * opened and checked against the manifest, and the processing job is enqueued. If any of that fails,
 * the transaction rolls back whole and the answer is 503 `slip_intake_unavailable`: there is never a
 * receipt without its evidence and its job, nor evidence without a receipt.
 *
 * Idempotency is by the logical evidence (`evidenceFingerprint`), through the service's idempotency
 * records scoped to the order, so a retry replays the same receipt and other evidence under the same
 * key is 409 `idempotency_key_reused`. The verification pipeline (src/verification) consumes receipts
 * one at a time per order through `headOfQueue`, `markClaimed` and `complete`.
 */

export const PROCESS_SLIP_TASK = 'slips.process';
/** Receipts accepted per order, all cases counted (spec, Limits). */
export const MAX_RECEIPTS_PER_ORDER = 3;
/**
 * A slip job retries with the queue's backoff (1 s doubling, capped at an hour) for about a day before it
 * is marked failed: long enough to ride out a database or provider outage, bounded so it cannot loop.
 */
export const PROCESS_SLIP_MAX_ATTEMPTS = 30;

export const FIELDS_PURPOSE = 'slips.receipt.fields';
export const TRANSFER_PURPOSE = 'slips.receipt.transfer';

export interface SlipsDependencies {
  database: Database;
  clock: Clock;
  logger: Logger;
  secretBox: SecretBox;
  cipher: EvidenceCipher;
  blobs: BlobStore;
  deposits: DepositService;
  idempotency: IdempotencyService;
  /**
   * Told once an upload has committed, so that a worker in this process claims the slip at once instead of
   * at its next poll (250 ms when idle). A worker in another process still finds it by polling.
   */
  on_accepted: () => void;
  /** The uploads this process reads and stores at once, and the bounded queue in front of them. */
  intake_gate: ConcurrencyGate;
  /** Told when an upload found no slot (a full queue or a long wait), for the metric. */
  on_intake_refused: (refusal: GateRefusal) => void;
}

/** The wait a client is told after its upload found the intake full: a few uploads' time. */
const INTAKE_FULL_RETRY_AFTER_SECONDS = 2;

/** An upload as the route hands it over. */
export interface UploadInput {
  claims: SlipTokenClaims;
  idempotency_key: string;
  request_id: string;
  path: string;
  evidence: SubmittedEvidence;
}

/** What an upload stores and answers; `replayed` for an idempotent repeat. */
export interface UploadAnswer {
  receipt: SlipReceiptView;
  replayed: boolean;
}

/**
 * A receipt's sealed image as the statement that found the receipt read it (`peekHeadOfQueueWithEvidence`),
 * for `openEvidence` to open without reading the store again. Opaque to other modules.
 */
export interface StoredEvidence {
  readonly receipt_id: string;
  readonly ciphertext: Buffer | null;
}

/** The evidence of a receipt, opened for the pipeline. */
export interface OpenedEvidence {
  image: { bytes: Buffer; media_type: SlipImageMediaType } | null;
  fields: SubmittedFields | null;
}

/** The bank's transfer as the verification pipeline sealed it on the receipt (VerifiedTransfer, timestamps as text). */
interface StoredTransfer {
  sending_bank_code: string;
  trans_ref: string;
  amount_minor: number;
  occurred_at: string;
  sender: { bank_code: string; account_number: string; name_th: string | null; name_en: string | null };
  receiver: { bank_code: string; account_number: string; name_th: string | null; name_en: string | null };
}

type ReviewedParty = { bank_code: string; account_number_masked: string; name_th: string | null; name_en: string | null };

/** A receipt as the review desk shows it. */
export interface ReviewedReceipt {
  receipt_id: string;
  received_at: string;
  shape: SlipReceiptRow['shape'];
  media_type: SlipReceiptRow['media_type'];
  size_bytes: number | null;
  /** When the evidence retention deleted the image; null while it is kept. */
  evidence_purged_at: string | null;
  status: SlipReceiptRow['status'];
  outcome: string | null;
  verification: SlipReceiptRow['verification'];
  bank_transfer: { sending_bank_code: string; trans_ref: string; amount_minor: number; occurred_at: string; sender: ReviewedParty; receiver: ReviewedParty } | null;
}

/** A full account number never leaves the service: every character but the last four becomes `x`. */
function maskedParty(party: StoredTransfer['sender']): ReviewedParty {
  const account = party.account_number;
  return { bank_code: party.bank_code, account_number_masked: 'x'.repeat(Math.max(0, account.length - 4)) + account.slice(-4), name_th: party.name_th, name_en: party.name_en };
}

/** The six booleans a processed receipt's checks recorded (src/verification/service.ts), or null when none ran. */
function verifiedBooleans(verification: Record<string, unknown> | null): Record<string, unknown> | null {
  const booleans = verification?.booleans;
  return typeof booleans === 'object' && booleans !== null ? (booleans as Record<string, unknown>) : null;
}

/** A purged image answers 410 `slip_evidence_purged`, naming the receipt and when, instead of bytes. */
function refuseWhenPurged(row: SlipReceiptRow): void {
  if (row.evidence_purged_at === null) return;
  throw new ApiError('slip_evidence_purged', { details: { receipt_id: row.receipt_id, evidence_purged_at: formatTimestamp(row.evidence_purged_at) } });
}

function receiptView(receipt_id: string, received_at: Date, livemode: boolean): SlipReceiptView {
  return { receipt_id, status: 'accepted', received_at: formatTimestamp(received_at), livemode };
}

/** The idempotency scope of an order's capability calls: its own, apart from the merchant's API keys. */
function capabilityScope(claims: SlipTokenClaims, idempotency_key: string) {
  return { white_label_id: claims.wl, merchant_id: `capability:${claims.dep}`, livemode: claims.livemode, idempotency_key };
}

export class SlipsService {
  constructor(private readonly deps: SlipsDependencies) {}

  /**
   * Runs an upload's reading and storing inside a slot of the intake gate. Slip intake is never shed
   * (spec, slip rule 6): an upload waits for a slot rather than being refused for load. Only the queue's
   * own bounds end a wait, with the endpoint's retryable 503 `slip_intake_unavailable`: nothing of the
   * upload was read or stored, and its Idempotency-Key was not used.
   */
  async withIntakeSlot<T>(work: () => Promise<T>): Promise<T> {
    const entry = await this.deps.intake_gate.enter();
    if (!entry.ok) {
      this.deps.on_intake_refused(entry.refusal);
      throw new ApiError('slip_intake_unavailable', { retry_after_seconds: INTAKE_FULL_RETRY_AFTER_SECONDS, details: { reason: entry.refusal } });
    }
    try {
      return await work();
    } finally {
      entry.release();
    }
  }

  /**
   * Stores an upload durably and answers its receipt (202), or throws the spec's code. Business refusals
   * (404, 409, 410) are thrown as they are; any failure to store, read back or enqueue is 503
   * `slip_intake_unavailable`, after which nothing of the upload remains.
   *
   * A store that writes outside the transaction (a directory, an object store) gets the sealed blob and its
   * read-back before the transaction opens, so no transaction waits on its I/O; the blob is discarded again
   * when no receipt commits with it (a refusal, a replay of an earlier upload, a failure).
   */
  async upload(input: UploadInput): Promise<UploadAnswer> {
    const { claims, evidence } = input;
    const receipt_id = newId('slip_receipt');
    const fingerprint = evidenceFingerprint(evidence);
    const address: BlobAddress = { white_label_id: claims.wl, blob_key: receipt_id };
    const sealed = evidence.shape === 'reference' ? null : this.deps.cipher.seal(address, evidence.image);
    const beforeTransaction = sealed !== null && this.deps.blobs.writes === 'before_transaction';
    const written = { blob: false };
    try {
      if (beforeTransaction && evidence.shape !== 'reference') {
        written.blob = true;
        await this.deps.blobs.put(this.deps.database, address, sealed.ciphertext);
        await this.readBack(this.deps.database, address, sealed, evidence.image);
      }
      const stored = await this.deps.idempotency.execute(
        capabilityScope(claims, input.idempotency_key),
        // The fingerprint is the evidence's, not the request bytes': boundaries and key order do not count.
        { fingerprint: sha256Hex(`POST\n${input.path}\n${fingerprint}`), request_id: input.request_id },
        (tx) => this.storeReceipt(tx, input, { receipt_id, fingerprint, address, sealed, in_transaction: !beforeTransaction, written }),
      );
      // A replay answers the receipt of the first upload: the blob written for this one belongs to no receipt.
      if (stored.replayed && written.blob) await this.deps.blobs.discard(address).catch(() => undefined);
      if (!stored.replayed) this.deps.on_accepted();
      return { receipt: JSON.parse(stored.body_text) as SlipReceiptView, replayed: stored.replayed };
    } catch (error) {
      if (written.blob) await this.deps.blobs.discard(address).catch(() => undefined);
      if (error instanceof ApiError || error instanceof InvariantViolation) throw error;
      // The evidence could not be confirmed durable: the client retries with the same key and evidence.
      this.deps.logger.error({ err: error, deposit_id: claims.dep, blob_store: this.deps.blobs.kind }, 'slip intake could not be confirmed');
      throw new ApiError('slip_intake_unavailable', { retry_after_seconds: 1 });
    }
  }

  /**
   * The upload's transaction: the order admits the slip, the receipt with its manifest is written, its job
   * enqueued, and (for the PostgreSQL store, `in_transaction`) the blob written and read back.
   */
  private async storeReceipt(
    tx: Queryable,
    input: UploadInput,
    blob: { receipt_id: string; fingerprint: string; address: BlobAddress; sealed: SealedEvidence | null; in_transaction: boolean; written: { blob: boolean } },
  ) {
    const { claims, evidence } = input;
    const received_at = this.deps.clock.now();
    const admitted = await this.deps.deposits.admitSlip(tx, {
      white_label_id: claims.wl,
      deposit_id: claims.dep,
      livemode: claims.livemode,
      hold_until_seconds: claims.hold_until,
      at: received_at,
    });
    if (!admitted) throw new ApiError('resource_not_found');
    if (!admitted.ok) throw admitted.error;
    const counts = await repository.receiptCounts(tx, claims.wl, claims.dep);
    if (counts.total >= MAX_RECEIPTS_PER_ORDER) {
      throw new ApiError('slip_limit_reached', { details: { deposit_id: claims.dep, max_uploads: MAX_RECEIPTS_PER_ORDER } });
    }
    const writesHere = blob.sealed !== null && blob.in_transaction;
    if (writesHere && blob.sealed !== null) {
      blob.written.blob = true;
      await this.deps.blobs.put(tx, blob.address, blob.sealed.ciphertext);
    }
    const row = this.receiptRow(input, { receipt_id: blob.receipt_id, fingerprint: blob.fingerprint, merchant_id: admitted.value.merchant_id, received_at, sealed: blob.sealed });
    await repository.insertReceipt(tx, row);
    const job = await enqueueJob(tx, this.deps.clock, {
      task: PROCESS_SLIP_TASK,
      payload: { white_label_id: claims.wl, deposit_id: claims.dep, receipt_id: blob.receipt_id },
      job_key: `${PROCESS_SLIP_TASK}:${blob.receipt_id}`,
      max_attempts: PROCESS_SLIP_MAX_ATTEMPTS,
      white_label_id: claims.wl,
    });
    if (job === null) throw new Error('the slip processing job was not enqueued');
    if (writesHere && blob.sealed !== null && evidence.shape !== 'reference') await this.readBack(tx, blob.address, blob.sealed, evidence.image);
    return { status: 202, body: receiptView(blob.receipt_id, received_at, row.livemode), headers: { 'Cache-Control': 'no-store' } };
  }

  /** The receipt row of an upload, with the image's manifest when it has one. */
  private receiptRow(input: UploadInput, known: { receipt_id: string; fingerprint: string; merchant_id: string; received_at: Date; sealed: SealedEvidence | null }): SlipReceiptRow {
    const { claims, evidence } = input;
    const fields = submittedFields(evidence);
    const image =
      evidence.shape === 'reference' || known.sealed === null
        ? { media_type: null, size_bytes: null, image_sha256: null, blob_store: null, wrapped_key: null }
        : {
            media_type: evidence.media_type,
            size_bytes: evidence.image.length,
            image_sha256: evidence.image_sha256,
            blob_store: this.deps.blobs.kind,
            wrapped_key: known.sealed.wrapped_key,
          };
    return {
      white_label_id: claims.wl,
      merchant_id: known.merchant_id,
      livemode: claims.livemode,
      receipt_id: known.receipt_id,
      deposit_id: claims.dep,
      idempotency_key: input.idempotency_key,
      request_id: input.request_id,
      fingerprint: known.fingerprint,
      shape: evidence.shape,
      ...image,
      fields_sealed: fields === null ? null : this.deps.secretBox.seal(JSON.stringify(fields), FIELDS_PURPOSE),
      received_at: known.received_at,
      status: 'accepted',
      outcome: null,
      verification: null,
      transfer_sealed: null,
      processed_at: null,
      evidence_purged_at: null,
    };
  }

  /**
   * The read-back before the 202: the store holds exactly the ciphertext that was sealed (the PostgreSQL
   * store compares length and SHA-256 in the database, so the blob does not cross the wire again), and that
   * ciphertext opens with its wrapped key to exactly the image received. Throws on any difference.
   */
  private async readBack(db: Queryable, address: BlobAddress, sealed: SealedEvidence, image: Buffer): Promise<void> {
    if (!(await this.deps.blobs.storedExactly(db, address, sealed.ciphertext)) || !this.deps.cipher.opensTo(address, sealed, image)) {
      throw new Error('slip evidence read back does not match what was stored');
    }
  }

  private async openImage(db: Queryable, row: SlipReceiptRow, stored: StoredEvidence | null = null): Promise<Buffer | null> {
    if (row.wrapped_key === null) return null;
    const address: BlobAddress = { white_label_id: row.white_label_id, blob_key: row.receipt_id };
    invariant(stored === null || stored.receipt_id === row.receipt_id, 'stored evidence opens with its own receipt');
    const ciphertext = stored === null ? await this.deps.blobs.get(db, address) : stored.ciphertext;
    if (ciphertext === null) return null;
    return this.deps.cipher.open(address, { ciphertext, wrapped_key: row.wrapped_key });
  }

  /**
   * A receipt's evidence for the pipeline: the image (checked against its manifest) and the fields. With
   * `stored` (from `peekHeadOfQueueWithEvidence`), the image is the one read with the receipt.
   */
  async openEvidence(db: Queryable, row: SlipReceiptRow, stored: StoredEvidence | null = null): Promise<OpenedEvidence> {
    let image: OpenedEvidence['image'] = null;
    if (row.media_type !== null) {
      const bytes = await this.openImage(db, row, stored);
      invariant(bytes !== null && sha256Hex(bytes) === row.image_sha256, 'a receipt keeps its evidence');
      image = { bytes, media_type: row.media_type };
    }
    const fields = row.fields_sealed === null ? null : (JSON.parse(this.deps.secretBox.open(row.fields_sealed, FIELDS_PURPOSE)) as SubmittedFields);
    return { image, fields };
  }

  /** GET /v1/pay/deposits/{id}/slip: the merchant's stored image of its order (the newest, or a named receipt). */
  async imageFor(
    db: Queryable,
    account: { white_label_id: string; merchant_id: string; livemode: boolean },
    deposit_id: string,
    receipt_id: string | null,
  ): Promise<{ bytes: Buffer; media_type: SlipImageMediaType; receipt_id: string } | null> {
    const row = await repository.findImageReceipt(db, account, deposit_id, receipt_id);
    if (!row || row.media_type === null) return null;
    refuseWhenPurged(row);
    const bytes = await this.openImage(db, row);
    invariant(bytes !== null && sha256Hex(bytes) === row.image_sha256, 'a receipt keeps its evidence');
    return { bytes, media_type: row.media_type, receipt_id: row.receipt_id };
  }

  /**
   * The receipts of an order as the review desk shows them: how each slip came, what processing
   * concluded, and the bank's verified transfer opened for the reviewer with account numbers masked to
   * their last four characters (the names stay whole: comparing them is the reviewer's job).
   */
  async receiptsForReview(db: Queryable, white_label_id: string, deposit_id: string): Promise<ReviewedReceipt[]> {
    const rows = await repository.listReceiptsOfDeposit(db, white_label_id, deposit_id);
    return rows.map((row) => {
      const transfer = row.transfer_sealed === null ? null : (JSON.parse(this.deps.secretBox.open(row.transfer_sealed, TRANSFER_PURPOSE)) as StoredTransfer);
      return {
        receipt_id: row.receipt_id,
        received_at: formatTimestamp(row.received_at),
        shape: row.shape,
        media_type: row.media_type,
        size_bytes: row.size_bytes,
        evidence_purged_at: row.evidence_purged_at === null ? null : formatTimestamp(row.evidence_purged_at),
        status: row.status,
        outcome: row.outcome,
        verification: row.verification,
        bank_transfer:
          transfer === null
            ? null
            : {
                sending_bank_code: transfer.sending_bank_code,
                trans_ref: transfer.trans_ref,
                amount_minor: transfer.amount_minor,
                occurred_at: transfer.occurred_at,
                sender: maskedParty(transfer.sender),
                receiver: maskedParty(transfer.receiver),
              },
      };
    });
  }

  /**
   * Whether the order's payer is proven: every transfer the bank verified as paid into this order (a slip whose checks
   * found its receiver among the order's legs) came from the account the payer declared, its bank and its number both
   * matching; and there is at least one. A refund is paid only to such an account (docs/decisions/refunds.md).
   */
  async payerProven(db: Queryable, white_label_id: string, deposit_id: string): Promise<boolean> {
    const rows = await repository.listReceiptsOfDeposit(db, white_label_id, deposit_id);
    const paidIn = rows.map((row) => verifiedBooleans(row.verification)).filter((booleans) => booleans !== null && booleans.receiver_match === true);
    return paidIn.length > 0 && paidIn.every((booleans) => booleans?.sender_bank_match === true && booleans.sender_account_match === true);
  }

  /** A receipt's image for the review desk (back-office credentials, never a public link). */
  async imageForReview(db: Queryable, white_label_id: string, deposit_id: string, receipt_id: string): Promise<{ bytes: Buffer; media_type: SlipImageMediaType } | null> {
    const row = await repository.findReceiptInBrand(db, white_label_id, deposit_id, receipt_id);
    if (!row || row.media_type === null) return null;
    refuseWhenPurged(row);
    const bytes = await this.openImage(db, row);
    invariant(bytes !== null && sha256Hex(bytes) === row.image_sha256, 'a receipt keeps its evidence');
    return { bytes, media_type: row.media_type };
  }

  /**
   * The order's oldest unprocessed receipt, locked (receipts of an order are processed one at a time).
   * `carried` reads (src/platform/read-part.ts) ride on the locking statement, after the receipt's lock, each
   * parsed by its part: the slip consumer carries the order's lock as a planned read (`PlannedRead`), which
   * records what it answered for the consumer's next step. `uploads` is how many slips the order has had
   * (every receipt, whatever its status), read by the same statement: the order's `attempts_left` counts uploads.
   */
  async headOfQueue(
    tx: Queryable,
    white_label_id: string,
    deposit_id: string,
    carried: readonly ReadPart<unknown>[] = [],
  ): Promise<{ receipt: SlipReceiptRow; uploads: number } | null> {
    const head = await repository.lockHeadOfQueue(tx, white_label_id, deposit_id, carried);
    return head ? { receipt: head.receipt, uploads: head.uploads } : null;
  }

  /**
   * The order's oldest unprocessed receipt without its lock, outside a transaction: the slip consumer reads the
   * slip and asks the bank first, then locks the receipt (`headOfQueue`) in the transaction that decides it and
   * checks that it is still the head (another run may have processed it meanwhile). With the PostgreSQL blob
   * store the same statement reads the receipt's sealed image, so that opening it (`openEvidence`) costs no
   * round trip of its own; `stored` is null with another store, which `openEvidence` reads then.
   */
  async peekHeadOfQueueWithEvidence(db: Queryable, white_label_id: string, deposit_id: string): Promise<{ receipt: SlipReceiptRow; stored: StoredEvidence | null } | null> {
    const withBlob = this.deps.blobs.kind === 'postgres';
    const head = await repository.findHeadOfQueue(db, white_label_id, deposit_id, { blob: withBlob });
    if (head === null) return null;
    return { receipt: head.receipt, stored: withBlob ? { receipt_id: head.receipt.receipt_id, ciphertext: head.ciphertext } : null };
  }

  /**
   * Marks the locked head receipt claimed. The write is queued in the transaction (the receipt's lock is
   * held since `headOfQueue`), and a receipt that was not `accepted` fails the transaction at the flush.
   */
  async markClaimed(tx: Queryable, row: SlipReceiptRow): Promise<void> {
    await repository.setReceiptStatus(
      tx,
      { white_label_id: row.white_label_id, receipt_id: row.receipt_id, from: 'accepted', to: 'claimed' },
      () => new InvariantViolation('an accepted receipt is claimed once'),
    );
  }

  /**
   * Records what processing concluded; the bank's transfer is kept sealed, for the reviewer. Queued like
   * `markClaimed`: a receipt completed twice fails the transaction at the flush.
   */
  async complete(
    tx: Queryable,
    row: SlipReceiptRow,
    input: { outcome: string; verification: Record<string, unknown> | null; transfer: Record<string, unknown> | null },
  ): Promise<void> {
    await repository.completeReceipt(
      tx,
      {
        white_label_id: row.white_label_id,
        receipt_id: row.receipt_id,
        outcome: input.outcome,
        verification: input.verification,
        transfer_sealed: input.transfer === null ? null : this.deps.secretBox.seal(JSON.stringify(input.transfer), TRANSFER_PURPOSE),
        processed_at: this.deps.clock.now(),
      },
      () => new InvariantViolation('a receipt is completed once'),
    );
  }

  /** POST at `claim_url`: opens a late-slip claim with the order's capability, idempotent by key. */
  async openClaim(input: {
    claims: SlipTokenClaims;
    idempotency_key: string;
    request_id: string;
    fingerprint: string;
    evidence: LateSlipClaimEvidence;
  }): Promise<{ claim: ClaimView; replayed: boolean }> {
    const { claims } = input;
    const stored = await this.deps.idempotency.execute(capabilityScope(claims, input.idempotency_key), { fingerprint: input.fingerprint, request_id: input.request_id }, async (tx) => {
      const opened: Result<{ claim: ClaimView; created: boolean }> | null = await this.deps.deposits.openLateSlipClaim(tx, {
        white_label_id: claims.wl,
        deposit_id: claims.dep,
        livemode: claims.livemode,
        evidence: input.evidence,
        opened_by: { type: 'end_user' },
        cause: { request_id: input.request_id, idempotency_key: input.idempotency_key, api_version: claims.api_version },
      });
      if (!opened) throw new ApiError('resource_not_found');
      if (!opened.ok) throw opened.error;
      // The same transfer claimed again (another key) answers the claim it opened before.
      return { status: 201, body: opened.value.claim };
    });
    return { claim: JSON.parse(stored.body_text) as ClaimView, replayed: stored.replayed };
  }
}
