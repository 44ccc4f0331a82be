-- Webhook deliveries (the delivery log) and what the real-time stream resumes from.

-- The JetStream sequence an event got when published: SSE resumes after Last-Event-ID
-- by looking it up here.
ALTER TABLE outbox ADD COLUMN stream_seq BIGINT;

-- Consecutive failed attempts of an endpoint, and since when it has been failing: an
-- endpoint failing for long enough is disabled.
ALTER TABLE webhooks
    ADD COLUMN failure_streak INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN failing_since TIMESTAMPTZ;

-- One event for one webhook. A dispatcher pod claims a delivery by setting locked_by and
-- locked_until (longer than an attempt's timeout), so two pods never attempt it at the
-- same time; a crashed pod's claims lapse and another pod retries them.
CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    webhook_id       TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    instance_id      TEXT NOT NULL,
    event_id         TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    state            TEXT NOT NULL DEFAULT 'pending',
    attempts         INTEGER NOT NULL DEFAULT 0,
    response_status  INTEGER,
    latency_ms       INTEGER,
    last_error       TEXT,
    next_attempt_at  TIMESTAMPTZ,
    -- Past this the delivery fails instead of being retried (restarted by a resend).
    retry_until      TIMESTAMPTZ NOT NULL,
    locked_by        TEXT,
    locked_until     TIMESTAMPTZ,
    -- A fresh id per claim: an outcome is written only under the claim it was made for,
    -- so a late answer to a lapsed claim changes nothing, even on the same pod.
    claim_id         TEXT,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    delivered_at     TIMESTAMPTZ,
    CONSTRAINT webhook_deliveries_state_check CHECK (state IN ('pending', 'succeeded', 'failed')),
    CONSTRAINT webhook_deliveries_event_key UNIQUE (webhook_id, event_id)
);
-- Due retries (the scanner's claim), and the delivery log newest first.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_log_idx ON webhook_deliveries (webhook_id, id DESC);
