import type { Writable } from 'node:stream';
import busboy from 'busboy';
import { BodyRefusal, chunkCollector } from '../http/body-reader.ts';
import { decodeJson, isJsonMediaType } from '../http/json-body.ts';
import { ApiError, type FieldProblem } from '../platform/errors.ts';
import { sha256Hex } from '../platform/crypto.ts';
import { parseTimestamp } from '../platform/time.ts';
import { unstorableTextPaths } from '../http/validation.ts';
import { SLIP_MAX_BYTES } from '../slip-capability/capability.ts';
import { SLIP_IMAGE_MEDIA_TYPES, type SlipImageMediaType, type SubmittedFields } from './types.ts';

/**
 * The three body shapes of a slip upload (spec, POST /v1/pay/deposits/{id}/slip): multipart `file`
 * with an optional `payload`; JSON `image_base64` with an optional `payload`; JSON reference only
 * (`trans_ref`, `sending_bank_code`, `occurred_at`). Parsing ends in the evidence, or throws the
 * spec's code: 400 `unsupported_media_type` for another Content-Type, 400 `malformed_json` for a JSON
 * body that is not JSON, and 422 `validation_error` with `details.fields[]` for everything else.
 *
 * The image's type comes from its magic bytes (`file-type`), never from the file name or a part's
 * Content-Type, and its size is that of the decoded bytes, never of the base64 text.
 */

/** Base64 of `max_bytes`, the largest JSON shape, plus room for its other fields and the JSON itself. */
export const SLIP_BODY_LIMIT_BYTES = Math.ceil(SLIP_MAX_BYTES / 3) * 4 + 64 * 1024;
/** The mini-QR text of a Thai slip is about 60 characters; the bound leaves room and refuses junk. */
export const PAYLOAD_MAX_LENGTH = 512;

const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;
const TRANS_REF = /^[A-Za-z0-9]{1,50}$/;
const BANK_CODE = /^[0-9]{3}$/;
const BASE64_TEXT = /^[A-Za-z0-9+/_-]*={0,2}$/;
const DATA_URL_PREFIX = /^data:image\/(?:png|jpeg|webp);base64,/;
const MEDIA_TYPE_HINT = SLIP_IMAGE_MEDIA_TYPES.join(', ');

export type SubmittedEvidence =
  /** `image_sha256`: the decoded image's hash, computed once for the fingerprint and the manifest. */
  | { shape: 'multipart' | 'json_base64'; image: Buffer; image_sha256: string; media_type: SlipImageMediaType; payload: string | null }
  | { shape: 'reference'; trans_ref: string; sending_bank_code: string; occurred_at: Date };

function refuse(problems: FieldProblem[]): never {
  throw new ApiError('validation_error', { details: { fields: problems } });
}

function mediaTypeOf(header: string | undefined): 'multipart' | 'json' | null {
  const mediaType = header?.split(';')[0]?.trim().toLowerCase();
  if (mediaType === 'multipart/form-data') return 'multipart';
  if (mediaType === 'application/json') return isJsonMediaType(header) ? 'json' : null;
  return null;
}

/** The image's own type (magic bytes), its size and its presence, checked as the spec requires. */
async function checkedImage(path: string, image: Buffer): Promise<{ image: Buffer; image_sha256: string; media_type: SlipImageMediaType }> {
  if (image.length === 0) refuse([{ path, reason: 'empty', hint: 'the slip image' }]);
  if (image.length > SLIP_MAX_BYTES) refuse([{ path, reason: 'too_large', hint: `at most ${SLIP_MAX_BYTES} decoded bytes` }]);
  // Loaded with the first upload, not at start-up: a process that takes no slip does not hold it.
  const { fileTypeFromBuffer } = await import('file-type');
  const detected = await fileTypeFromBuffer(image);
  const mediaType = SLIP_IMAGE_MEDIA_TYPES.find((allowed) => allowed === detected?.mime);
  if (!mediaType) refuse([{ path, reason: 'unsupported_type', hint: MEDIA_TYPE_HINT }]);
  return { image, image_sha256: sha256Hex(image), media_type: mediaType };
}

function checkedPayload(value: unknown): string | null {
  if (value === undefined) return null;
  if (typeof value !== 'string' || value.length === 0 || value.length > PAYLOAD_MAX_LENGTH || !PRINTABLE_ASCII.test(value)) {
    refuse([{ path: 'payload', reason: 'invalid_format', hint: `the mini-QR text: printable ASCII, at most ${PAYLOAD_MAX_LENGTH} characters` }]);
  }
  return value;
}

/**
 * Decodes `image_base64` strictly: standard or URL-safe alphabet, padding only at the end, line breaks
 * and spaces ignored (they carry no data), and an optional `data:image/...;base64,` prefix as a
 * browser's canvas produces. Anything else is refused rather than silently skipped, as Node's decoder would.
 */
function decodeBase64(text: string): Buffer {
  const compact = text.replace(DATA_URL_PREFIX, '').replace(/[\r\n\t ]+/g, '');
  if (!BASE64_TEXT.test(compact) || compact.length % 4 === 1) {
    refuse([{ path: 'image_base64', reason: 'invalid_base64', hint: 'standard base64 of the image bytes' }]);
  }
  return Buffer.from(compact, compact.includes('-') || compact.includes('_') ? 'base64url' : 'base64');
}

/** The evidence of a JSON body already in memory (a sandbox scenario's own upload, and the JSON shapes here). */
export async function parseJsonEvidence(raw: Buffer): Promise<SubmittedEvidence> {
  const body = decodeJson(raw);
  if (body === null || typeof body !== 'object' || Array.isArray(body)) refuse([{ path: '$', reason: 'must_be_object' }]);
  const unstorable = unstorableTextPaths(body);
  if (unstorable.length > 0) refuse(unstorable);
  const fields = body as Record<string, unknown>;
  const keys = Object.keys(fields);
  if ('image_base64' in fields) {
    const unknown = keys.filter((key) => key !== 'image_base64' && key !== 'payload');
    if (unknown.length > 0) refuse(unknown.map((key) => ({ path: key, reason: 'unknown_field' })));
    if (typeof fields.image_base64 !== 'string') refuse([{ path: 'image_base64', reason: 'must_be_string' }]);
    const payload = checkedPayload(fields.payload);
    return { shape: 'json_base64', ...(await checkedImage('image_base64', decodeBase64(fields.image_base64))), payload };
  }
  const referenceKeys = ['trans_ref', 'sending_bank_code', 'occurred_at'];
  if (keys.some((key) => referenceKeys.includes(key))) {
    const problems: FieldProblem[] = keys.filter((key) => !referenceKeys.includes(key)).map((key) => ({ path: key, reason: 'unknown_field' }));
    const { trans_ref, sending_bank_code, occurred_at } = fields;
    if (trans_ref === undefined) problems.push({ path: 'trans_ref', reason: 'required' });
    else if (typeof trans_ref !== 'string' || !TRANS_REF.test(trans_ref)) problems.push({ path: 'trans_ref', reason: 'invalid_format', hint: '1 to 50 letters and digits' });
    if (sending_bank_code === undefined) problems.push({ path: 'sending_bank_code', reason: 'required' });
    else if (typeof sending_bank_code !== 'string' || !BANK_CODE.test(sending_bank_code)) problems.push({ path: 'sending_bank_code', reason: 'unknown_bank', hint: 'a three-digit code from GET /v1/pay/banks' });
    const instant = typeof occurred_at === 'string' ? parseTimestamp(occurred_at) : null;
    if (occurred_at === undefined) problems.push({ path: 'occurred_at', reason: 'required' });
    else if (!instant) problems.push({ path: 'occurred_at', reason: 'invalid_timestamp', hint: 'RFC 3339 UTC with milliseconds, e.g. 2026-08-01T07:05:00.000Z' });
    if (problems.length > 0) refuse(problems);
    return { shape: 'reference', trans_ref: trans_ref as string, sending_bank_code: sending_bank_code as string, occurred_at: instant as Date };
  }
  refuse([{ path: 'image_base64', reason: 'required', hint: 'image_base64, or trans_ref with sending_bank_code and occurred_at' }]);
}

/** What a multipart body said, part by part, as busboy reports it. */
class MultipartParts {
  readonly problems: FieldProblem[] = [];
  private readonly chunks: Buffer[] = [];
  private fileSeen = false;
  private fileTooLarge = false;
  private payload: string | undefined;

  /**
   * Listens to the parser's parts. Every file stream gets an error listener, the kept one and the
   * skipped ones: busboy errors a part's stream when the body ends inside it, and a stream error with no
   * listener is an uncaught exception that would stop the whole process.
   */
  attach(parser: busboy.Busboy): void {
    parser.on('file', (name, stream) => {
      stream.on('error', () => undefined);
      if (name !== 'file' || this.fileSeen) {
        this.problems.push({ path: name, reason: name === 'file' ? 'repeated_field' : 'unknown_field' });
        stream.resume();
        return;
      }
      this.fileSeen = true;
      stream.on('data', (chunk: Buffer) => this.chunks.push(chunk));
      stream.on('limit', () => {
        this.fileTooLarge = true;
      });
    });
    parser.on('field', (name, value, info) => {
      if (name !== 'payload' || this.payload !== undefined) {
        this.problems.push({ path: name, reason: name === 'payload' ? 'repeated_field' : 'unknown_field' });
        return;
      }
      this.payload = info.valueTruncated ? '\u0000' : value;
    });
    for (const limit of ['partsLimit', 'filesLimit', 'fieldsLimit'] as const) {
      parser.on(limit, () => this.problems.push({ path: '$', reason: 'too_many_parts', hint: 'one file part and at most one payload field' }));
    }
  }

  /** The evidence the parts make, or the problems found, once the parser has closed. */
  async evidence(): Promise<SubmittedEvidence> {
    if (this.problems.length > 0) refuse(this.problems);
    if (!this.fileSeen) refuse([{ path: 'file', reason: 'required', hint: 'the slip image as the part named file' }]);
    if (this.fileTooLarge) refuse([{ path: 'file', reason: 'too_large', hint: `at most ${SLIP_MAX_BYTES} bytes` }]);
    const checkedText = this.payload === '\u0000' ? refuse([{ path: 'payload', reason: 'too_long' }]) : checkedPayload(this.payload);
    const image = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
    this.chunks.length = 0;
    return { shape: 'multipart' as const, ...(await checkedImage('file', image)), payload: checkedText };
  }
}

function malformedMultipart(hint?: string): ApiError {
  return new ApiError('validation_error', { details: { fields: [{ path: '$', reason: 'malformed_multipart', ...(hint ? { hint } : {}) }] } });
}

/**
 * Reads a multipart body as it arrives: the parts are parsed from the stream and only the file's bytes
 * are kept, so the request's bytes are never held whole beside the image. Limits make a hostile body
 * end early instead of growing. A body cut before its closing boundary, or otherwise not multipart, is
 * 422 `malformed_multipart`; a refusal of the body itself (its size, its pace) is the reader's.
 */
async function parseMultipart(contentType: string, body: EvidenceBody): Promise<SubmittedEvidence> {
  let parser: busboy.Busboy;
  try {
    // busboy 1.x, not the @fastify/busboy fork: the fork stalls for ever on a skipped part (a second
    // file) larger than a stream buffer, which would let a hostile body hold a request open.
    parser = busboy({
      headers: { 'content-type': contentType },
      // busboy reports the limit when a file reaches it: one byte over max_bytes is the limit.
      limits: { fields: 2, files: 1, parts: 3, fileSize: SLIP_MAX_BYTES + 1, fieldSize: PAYLOAD_MAX_LENGTH + 1, fieldNameSize: 64, headerPairs: 16 },
    });
  } catch {
    // No boundary, or a Content-Type busboy cannot read.
    throw malformedMultipart('multipart/form-data with a boundary');
  }
  const parts = new MultipartParts();
  parts.attach(parser);
  // `on`, not `once`: destroying a parser that has failed makes it emit its error again.
  const closed = new Promise<void>((resolve, reject) => {
    parser.once('close', resolve);
    parser.on('error', reject);
  });
  // Settled by `stream` below when it fails; never left to reject unobserved.
  closed.catch(() => undefined);
  let received: number;
  try {
    received = await body.stream(parser);
  } catch (error) {
    parser.destroy();
    if (error instanceof BodyRefusal) throw error;
    throw malformedMultipart();
  }
  if (received === 0) {
    parser.destroy();
    refuse([{ path: '$', reason: 'required', hint: 'a file, image_base64, or a reference' }]);
  }
  try {
    await closed;
  } catch {
    throw malformedMultipart();
  }
  return parts.evidence();
}

/** The unread body of a slip upload (src/http/context.ts, CapabilityBody). */
export interface EvidenceBody {
  stream(sink: Writable): Promise<number>;
}

/**
 * The body's shape from its Content-Type, decided from the headers before any byte of it is read:
 * another media type is 400 `unsupported_media_type` whatever the body holds.
 */
export function evidenceShapeOf(contentType: string | undefined): 'multipart' | 'json' {
  const kind = mediaTypeOf(contentType);
  if (kind === null) throw new ApiError('unsupported_media_type', { details: { accepted: ['multipart/form-data', 'application/json'] } });
  return kind;
}

/** Reads and checks the evidence of an upload whose shape `evidenceShapeOf` gave. */
export async function parseEvidence(contentType: string | undefined, body: EvidenceBody): Promise<SubmittedEvidence> {
  const kind = evidenceShapeOf(contentType);
  if (kind === 'multipart') return parseMultipart(contentType as string, body);
  const collector = chunkCollector();
  await body.stream(collector.sink);
  const raw = collector.bytes();
  if (raw.length === 0) refuse([{ path: '$', reason: 'required', hint: 'a file, image_base64, or a reference' }]);
  return parseJsonEvidence(raw);
}

/**
 * The logical evidence, independent of how it travelled: the decoded image's hash and the canonical
 * fields. The same slip sent again with another multipart boundary, JSON key order, base64 line
 * breaks, or even the other image shape, has the same fingerprint (spec, slip rule 5).
 */
export function evidenceFingerprint(evidence: SubmittedEvidence): string {
  const canonical =
    evidence.shape === 'reference'
      ? ['reference', evidence.sending_bank_code, evidence.trans_ref, evidence.occurred_at.toISOString()]
      : ['image', evidence.image_sha256, evidence.payload ?? ''];
  return sha256Hex(canonical.join('\n'));
}

/** The non-image fields as they are kept (sealed) on the receipt. */
export function submittedFields(evidence: SubmittedEvidence): SubmittedFields | null {
  if (evidence.shape === 'reference') {
    return { trans_ref: evidence.trans_ref, sending_bank_code: evidence.sending_bank_code, occurred_at: evidence.occurred_at.toISOString() };
  }
  return evidence.payload === null ? null : { payload: evidence.payload };
}
