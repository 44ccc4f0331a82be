-- The send queue and the local log of outgoing messages, and the event outbox.
-- Pacing settings an instance may set beyond min_interval_ms/max_per_minute.
ALTER TABLE instances
    ADD COLUMN time_zone TEXT NOT NULL DEFAULT 'UTC',
    ADD COLUMN send_window_start TIME,
    ADD COLUMN send_window_end TIME,
    ADD CONSTRAINT instances_send_window_check
        CHECK ((send_window_start IS NULL) = (send_window_end IS NULL));

CREATE TABLE messages (
    id                 TEXT PRIMARY KEY,
    instance_id        TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    -- Queue order within an instance.
    seq                BIGINT GENERATED ALWAYS AS IDENTITY,
    status             TEXT NOT NULL DEFAULT 'queued',
    to_jid             TEXT NOT NULL,
    type               TEXT NOT NULL,
    -- The validated message (text, caption, location, ...); media bytes live in media.
    content            JSONB NOT NULL,
    client_message_id  TEXT,
    -- SHA-256 of the canonical request, to tell a replay from a conflicting reuse.
    content_hash       TEXT NOT NULL,
    -- The network id, assigned before the first attempt (invariant 3).
    wa_message_id      TEXT NOT NULL,
    error              TEXT,
    attempts           INTEGER NOT NULL DEFAULT 0,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at            TIMESTAMPTZ,
    expires_at         TIMESTAMPTZ NOT NULL,
    CONSTRAINT messages_status_check CHECK (status IN ('queued', 'in_flight', 'sent', 'failed')),
    CONSTRAINT messages_client_id_key UNIQUE (instance_id, client_message_id)
);

-- The worker's queue head: unfinished messages of an instance in order.
CREATE INDEX messages_queue_idx ON messages (instance_id, seq) WHERE status IN ('queued', 'in_flight');

-- Media bytes sent with messages, readable by any worker.
CREATE TABLE media (
    id           TEXT PRIMARY KEY,
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    mime_type    TEXT NOT NULL,
    filename     TEXT,
    size         BIGINT NOT NULL,
    sha256       TEXT NOT NULL,
    data         BYTEA NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Events, written in the same transaction as the change they describe; a relay
-- publishes them to JetStream with Nats-Msg-Id = id (the webhooks issue).
CREATE TABLE outbox (
    id            TEXT PRIMARY KEY,
    instance_id   TEXT NOT NULL,
    type          TEXT NOT NULL,
    payload       JSONB NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    published_at  TIMESTAMPTZ
);
CREATE INDEX outbox_unpublished_idx ON outbox (created_at) WHERE published_at IS NULL;
