-- Issue 30: who has a review case open in the console (src/backoffice-console/presence.ts), so that the queue and
-- the case show when another reviewer has taken a case up before a decision shows it
-- (docs/decisions/backoffice-console.md, "Who is on a case").
--
-- One row per session and case: written when the case page is rendered and by the page's polling every five
-- seconds, so a row whose last_seen_at is older than the presence window (20 seconds) is a page that was closed.
-- The rows go with their session (housekeeping removes sessions a day after their end).

CREATE TABLE console_case_views (
  session_id      console_sessions_session_id NOT NULL REFERENCES console_sessions (session_id) ON DELETE CASCADE,
  white_label_id  text NOT NULL REFERENCES brands (white_label_id),
  deposit_id      text NOT NULL,
  staff_id        text NOT NULL,                                                     -- the person, for their name
  first_seen_at   timestamptz NOT NULL,                                              -- when they opened the case
  last_seen_at    timestamptz NOT NULL,                                              -- the page's last render or poll
  PRIMARY KEY (session_id, deposit_id)
);

-- The queue's page asks for its cases' viewers, a case for its own: by case, recent first.
CREATE INDEX console_case_views_by_case ON console_case_views (white_label_id, deposit_id, last_seen_at);
