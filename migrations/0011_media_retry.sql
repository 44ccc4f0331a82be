-- Received media whose download failed for a passing reason (the network or its media
-- servers briefly unreachable) is kept pending rather than given up: `remote` says where
-- to fetch it again and which logged message carries it; the instance's worker retries
-- it with backoff and, once it has the bytes (or the network says they are gone),
-- clears `remote` and updates the message's media descriptor.
ALTER TABLE media
    ADD COLUMN remote JSONB,
    ADD COLUMN fetch_attempts INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN fetch_after TIMESTAMPTZ;
CREATE INDEX media_pending_idx ON media (instance_id, fetch_after) WHERE remote IS NOT NULL;
