-- Usage per instance and UTC day. Message and media counts are added by the outbox
-- relay from the fenced transitions' events, in the transaction that marks them
-- published (so each counts once, and no column or index is added to the outbox);
-- delivery counts are rolled up from the delivery records, each row counted once (its
-- usage_counted flag set in the statement that adds it here); number lookups are added
-- by the lookup itself, API requests by each API pod every second.
CREATE TABLE usage_daily (
    instance_id           TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    day                   DATE NOT NULL,
    messages_queued       BIGINT NOT NULL DEFAULT 0,
    messages_sent         BIGINT NOT NULL DEFAULT 0,
    messages_failed       BIGINT NOT NULL DEFAULT 0,
    messages_expired      BIGINT NOT NULL DEFAULT 0,
    messages_received     BIGINT NOT NULL DEFAULT 0,
    media_bytes_sent      BIGINT NOT NULL DEFAULT 0,
    media_bytes_received  BIGINT NOT NULL DEFAULT 0,
    lookups_new           BIGINT NOT NULL DEFAULT 0,
    lookups_cached        BIGINT NOT NULL DEFAULT 0,
    deliveries_succeeded  BIGINT NOT NULL DEFAULT 0,
    deliveries_failed     BIGINT NOT NULL DEFAULT 0,
    requests_admin        BIGINT NOT NULL DEFAULT 0,
    requests_instance     BIGINT NOT NULL DEFAULT 0,
    requests_api_key      BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (instance_id, day)
);

ALTER TABLE webhook_deliveries ADD COLUMN usage_counted BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX webhook_deliveries_usage_idx ON webhook_deliveries (id) WHERE state <> 'pending' AND NOT usage_counted;
