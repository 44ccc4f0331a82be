-- The AI attendant (interface.md 4.12): one configuration per instance, the chats a
-- human took over, audio transcriptions, and one row per answered message, which makes "one reply per
-- message" hold across consumer pods and redeliveries and counts replies per hour.
CREATE TABLE attendants (
    instance_id    TEXT PRIMARY KEY REFERENCES instances (id) ON DELETE CASCADE,
    -- The configuration as the API took it, without its secret.
    config         JSONB NOT NULL,
    -- The provider's api_key or the webhook's secret, sealed (AES-256-GCM, bound to the
    -- instance id) with the deployment's key; never returned.
    secret         BYTEA,
    -- Set by the admin only: the provider may be on a private address.
    allow_private  BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE attendant_pauses (
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    chat_jid     TEXT NOT NULL,
    until        TIMESTAMPTZ NOT NULL,
    -- `human_reply` or `keyword`.
    reason       TEXT NOT NULL,
    PRIMARY KEY (instance_id, chat_jid)
);

CREATE TABLE attendant_replies (
    instance_id       TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    -- The received message answered (msg_...).
    inbound_id        TEXT NOT NULL,
    chat_jid          TEXT NOT NULL,
    -- The queued reply (msg_...).
    message_id        TEXT NOT NULL,
    tokens            BIGINT NOT NULL DEFAULT 0,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, inbound_id)
);
CREATE INDEX attendant_replies_chat_idx ON attendant_replies (instance_id, chat_jid, created_at);

-- Transcriptions of received voice and audio messages, made once through the provider's
-- /audio/transcriptions and sent with the conversation from then on.
CREATE TABLE attendant_transcripts (
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    message_id   TEXT NOT NULL,
    text         TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, message_id)
);

ALTER TABLE usage_daily
    ADD COLUMN attendant_replies BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN attendant_tokens  BIGINT NOT NULL DEFAULT 0;
