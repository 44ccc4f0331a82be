-- The idle-queue sweeper (db::messages::fail_idle) finds expired queued messages by this
-- index, so each sweep costs what it fails rather than a scan of every queued message.
CREATE INDEX messages_expiry_idx ON messages (expires_at) WHERE status = 'queued';
