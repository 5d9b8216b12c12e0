-- Issue 30: the console's disputes page lists a brand's disputes by opening time with a cursor, with or without a
-- status filter. withdrawal_disputes_by_status (migration 0013) serves the list filtered by status; this index serves
-- the list of every status, in either direction, without reading and sorting all of the brand's disputes.

CREATE INDEX withdrawal_disputes_desk ON withdrawal_disputes (white_label_id, opened_at, dispute_id);
