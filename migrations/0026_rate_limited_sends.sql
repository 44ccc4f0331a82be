-- A send the network refused for its rate is waited out, never failed for it (the queue
-- never answers 429): when it was last refused is kept on the message, for the ban-risk
-- signal `rate_limited` (earlier, such messages failed as `rate_limited: ...`).
ALTER TABLE messages ADD COLUMN rate_limited_at TIMESTAMPTZ;
