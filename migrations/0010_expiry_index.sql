-- The idle-queue sweeper (db::messages::fail_idle) finds expired queued messages by this
-- index, so each sweep costs what it fails rather than a scan of every queued message.
-- Building it blocks writes to messages while it scans the table. On a large deployment,
-- build it first by hand without blocking (CREATE INDEX CONCURRENTLY with this name and
-- definition); IF NOT EXISTS then makes this a no-op. (Migrations run in a transaction,
-- and concurrent builds in the test suite's parallel schemas deadlock each other.)
CREATE INDEX IF NOT EXISTS messages_expiry_idx ON messages (expires_at) WHERE status = 'queued';
