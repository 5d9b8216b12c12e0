-- A stored idempotency answer is sealed (AES-256-GCM, base64url: src/http/idempotency.ts), so it does not
-- compress, and a deposit's answer is about 3 KB. Over PostgreSQL's 2 KB threshold the toaster moved each one
-- out of line: every idempotent command wrote two TOAST chunks and their index entries besides its record
-- (four more writes per command, measured on the deposit benchmark, docs/benchmarks.md). With the target at its
-- largest, a record stays in its own row unless it exceeds about 8 KB; the bytes written are the same, the
-- extra writes are gone. Reads are unchanged: the answer is read only to replay it.
ALTER TABLE idempotency_records SET (toast_tuple_target = 8160);
