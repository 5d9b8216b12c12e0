/** Row types of the slips module. Column meanings are in migrations/0011_slips.sql. */

export const SLIP_IMAGE_MEDIA_TYPES = ['image/jpeg', 'image/png', 'image/webp'] as const;
export type SlipImageMediaType = (typeof SLIP_IMAGE_MEDIA_TYPES)[number];

export type SlipShape = 'multipart' | 'json_base64' | 'reference';
export type SlipReceiptStatus = 'accepted' | 'claimed' | 'processed';

export interface SlipReceiptRow {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  receipt_id: string;
  deposit_id: string;
  idempotency_key: string;
  request_id: string;
  fingerprint: string;
  shape: SlipShape;
  media_type: SlipImageMediaType | null;
  size_bytes: number | null;
  image_sha256: string | null;
  /** The store holding the image's ciphertext; null without an image, or once a purge deleted it from its store. */
  blob_store: 'postgres' | 'filesystem' | 's3' | null;
  wrapped_key: string | null;
  fields_sealed: string | null;
  received_at: Date;
  status: SlipReceiptStatus;
  outcome: string | null;
  verification: Record<string, unknown> | null;
  transfer_sealed: string | null;
  processed_at: Date | null;
  /** When the evidence retention purged the image (its manifest stays); null while it is kept. */
  evidence_purged_at: Date | null;
}

/** What the client submitted besides the image: the mini-QR payload, or the reference of a transfer. */
export interface SubmittedFields {
  payload?: string;
  trans_ref?: string;
  sending_bank_code?: string;
  occurred_at?: string;
}

/** The 202 body of a slip upload (spec, Slip receipt). */
export interface SlipReceiptView {
  receipt_id: string;
  status: 'accepted';
  received_at: string;
  livemode: boolean;
}
