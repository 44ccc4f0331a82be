-- Ban-risk telemetry (the account's age is one of its signals): when the account was
-- last paired. Instances linked before this migration count from their creation.
ALTER TABLE instances ADD COLUMN paired_at TIMESTAMPTZ;
-- The last evaluation (dispatchers evaluate each paired instance every risk_interval_ms).
ALTER TABLE instances ADD COLUMN risk_score REAL, ADD COLUMN risk_level TEXT, ADD COLUMN risk_at TIMESTAMPTZ;
-- The queue paused by a policy (critical risk, a temporary ban) until resumed: messages
-- stay queued (expiry still applies). A resume holds off the next automatic pause.
ALTER TABLE instances ADD COLUMN queue_paused_reason TEXT, ADD COLUMN queue_paused_at TIMESTAMPTZ,
    ADD COLUMN queue_resumed_at TIMESTAMPTZ;
UPDATE instances SET paired_at = created_at WHERE session IS NOT NULL;

-- The signals read an instance's finished messages of the last 7 days, and its rare
-- network incidents (temporary bans, logouts) from the outbox, without scanning either.
CREATE INDEX messages_done_idx ON messages (instance_id, updated_at) WHERE status IN ('sent', 'failed');
CREATE INDEX outbox_incidents_idx ON outbox (instance_id, created_at)
    WHERE type = 'instance.logged_out'
       OR (type = 'instance.state' AND payload->'data'->>'reason' LIKE 'temporarily banned%');
