-- The count check of a transaction's last batch of deferred writes (src/platform/unit-of-work.ts).
-- On PostgreSQL that batch is sent in the same round trip as its COMMIT, so its changed-row counts can no
-- longer be checked by the service between the two: the statement checks them itself and fails, which
-- turns the pipelined COMMIT into a rollback. The error's SQLSTATE (UW001) and its detail (the write's
-- index in the batch and the rows it changed) let the service throw the write's own business error.
CREATE FUNCTION deferred_write_check(write_index integer, changed_rows bigint, expected_rows integer) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
  IF changed_rows <> expected_rows THEN
    RAISE EXCEPTION 'deferred write % changed % rows instead of %', write_index, changed_rows, expected_rows
      USING ERRCODE = 'UW001', DETAIL = json_build_object('write_index', write_index, 'changed_rows', changed_rows)::text;
  END IF;
  RETURN changed_rows;
END
$$;
