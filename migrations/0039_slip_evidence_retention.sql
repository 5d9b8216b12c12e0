-- Issue 33, item 5: slip evidence in an object store, and a retention that purges old evidence
-- (docs/decisions/slips.md, "Evidence in an object store" and "Evidence retention").
--
-- * The closed list of blob stores gains `s3`: an S3-compatible object store (src/slips/s3-blob-store.ts).
-- * `evidence_purged_at` says when the retention job purged a receipt's image. The manifest stays (media type,
--   size, SHA-256: what was received) and the wrapped data key is erased, so that no copy the store may still
--   keep (a backup, an object version) can be opened again. `blob_store` names the store that still holds the
--   bytes until they are deleted from it; then it is null. The PostgreSQL store's blob is deleted in the
--   purge's own transaction; a file or an object is deleted after it commits, and a purge that stopped in
--   between finishes on the job's next run (the second index).
-- * The rules of the table's one multi-column CHECK change with it: a receipt with an image keeps its wrapped
--   key until its evidence is purged, and only a receipt with an image can have its evidence purged. A
--   function's arguments cannot change in place: the CHECK is dropped, the function replaced by one that also
--   takes evidence_purged_at, and the CHECK added back, with every earlier rule kept by name and expression.
-- * The retention job walks processed receipts with an image not yet purged, oldest first, across brands.
--   (Its rules: docs/decisions/slips.md.)

ALTER DOMAIN slip_receipts_blob_store DROP CONSTRAINT slip_receipts_blob_store_check;
ALTER DOMAIN slip_receipts_blob_store ADD CONSTRAINT slip_receipts_blob_store_check
  CHECK ((VALUE = ANY (ARRAY['postgres'::text, 'filesystem'::text, 's3'::text])));

ALTER TABLE slip_receipts ADD COLUMN evidence_purged_at timestamptz;

ALTER TABLE slip_receipts DROP CONSTRAINT slip_receipts_rules;
DROP FUNCTION slip_receipts_rules_hold(text, text, integer, text, text, text, text, text, timestamp with time zone);

CREATE FUNCTION slip_receipts_rules_hold(
  shape text,
  media_type text,
  size_bytes integer,
  image_sha256 text,
  blob_store text,
  wrapped_key text,
  status text,
  outcome text,
  processed_at timestamp with time zone,
  evidence_purged_at timestamp with time zone
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((shape = 'reference'::text) = (media_type IS NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "slip_receipts" violates check constraint "slip_receipts_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'slip_receipts_check', TABLE = 'slip_receipts';
  END IF;
  IF NOT coalesce((((media_type IS NULL) = (size_bytes IS NULL)) AND ((media_type IS NULL) = (image_sha256 IS NULL))
      AND (((media_type IS NULL) = (blob_store IS NULL)) OR (evidence_purged_at IS NOT NULL AND blob_store IS NULL))
      AND ((media_type IS NULL OR evidence_purged_at IS NOT NULL) = (wrapped_key IS NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "slip_receipts" violates check constraint "slip_receipts_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'slip_receipts_check1', TABLE = 'slip_receipts';
  END IF;
  IF NOT coalesce(((status = 'processed'::text) = ((outcome IS NOT NULL) AND (processed_at IS NOT NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "slip_receipts" violates check constraint "slip_receipts_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'slip_receipts_check2', TABLE = 'slip_receipts';
  END IF;
  IF NOT coalesce((evidence_purged_at IS NULL OR (media_type IS NOT NULL AND status = 'processed'::text)), true) THEN
    RAISE EXCEPTION 'new row for relation "slip_receipts" violates check constraint "slip_receipts_evidence_purged"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'slip_receipts_evidence_purged', TABLE = 'slip_receipts';
  END IF;
  RETURN true;
END $$;

ALTER TABLE slip_receipts
  ADD CONSTRAINT slip_receipts_rules CHECK (slip_receipts_rules_hold(shape, media_type, size_bytes, image_sha256, blob_store, wrapped_key, status, outcome, processed_at, evidence_purged_at));

CREATE INDEX slip_receipts_evidence_retention ON slip_receipts (received_at, white_label_id, receipt_id)
  WHERE media_type IS NOT NULL AND evidence_purged_at IS NULL AND status = 'processed';
CREATE INDEX slip_receipts_evidence_to_delete ON slip_receipts (blob_store, evidence_purged_at)
  WHERE evidence_purged_at IS NOT NULL AND blob_store IS NOT NULL;
