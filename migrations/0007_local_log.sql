-- The local log: every message an instance sends or receives, the chats they belong
-- to, and media received. Written by the worker that owns the instance (fenced on its
-- lease epoch); read by the API without asking the network.

-- Conversations, ordered by their last message.
CREATE TABLE chats (
    instance_id      TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    jid              TEXT NOT NULL,
    name             TEXT,
    last_message_at  TIMESTAMPTZ NOT NULL,
    unread_count     INTEGER NOT NULL DEFAULT 0,
    -- Messages up to here count as read (the account's own newest message, or a read).
    read_at          TIMESTAMPTZ,
    archived         BOOLEAN NOT NULL DEFAULT FALSE,
    pinned           BOOLEAN NOT NULL DEFAULT FALSE,
    muted_until      TIMESTAMPTZ,
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, jid)
);
-- GET {inst}/chats: newest last message first, keyset on (last_message_at, jid).
CREATE INDEX chats_order_idx ON chats (instance_id, last_message_at DESC, jid DESC);

-- The message log. It grows to billions of rows, so it is partitioned from the start:
-- by hash of the instance (every query names one instance, so each touches one
-- partition), 16 partitions; see ARCHITECTURE.md for how it grows further.
CREATE TABLE log_messages (
    instance_id    TEXT NOT NULL,
    -- msg_ id: for messages sent through the queue, the queue's id; else a new one.
    id             TEXT NOT NULL,
    chat_jid       TEXT NOT NULL,
    -- The network's id and time: idempotency key and order.
    wa_message_id  TEXT NOT NULL,
    ts             TIMESTAMPTZ NOT NULL,
    from_jid       TEXT NOT NULL,
    from_me        BOOLEAN NOT NULL,
    type           TEXT NOT NULL,
    content        JSONB NOT NULL,
    -- Outgoing: sent, delivered or read (receipts only move it forward).
    status         TEXT,
    -- live, history (synced at pairing) or queue (sent through POST messages).
    source         TEXT NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, id),
    CONSTRAINT log_messages_wa_key UNIQUE (instance_id, chat_jid, wa_message_id)
) PARTITION BY HASH (instance_id);
-- GET {inst}/chats/{jid}/messages: newest first, keyset on (ts, id).
CREATE INDEX log_messages_chat_idx ON log_messages (instance_id, chat_jid, ts DESC, id DESC);
-- Receipts find a message by its network id alone.
CREATE INDEX log_messages_wa_idx ON log_messages (instance_id, wa_message_id);

DO $$
BEGIN
    FOR i IN 0..15 LOOP
        EXECUTE format(
            'CREATE TABLE log_messages_p%s PARTITION OF log_messages FOR VALUES WITH (MODULUS 16, REMAINDER %s)',
            lpad(i::text, 2, '0'), i);
    END LOOP;
END $$;

-- Media: received media is stored like sent media; `expired` when the network no longer
-- had it (the bytes are gone: 410 media_unavailable).
ALTER TABLE media
    ADD COLUMN expired BOOLEAN NOT NULL DEFAULT FALSE,
    ALTER COLUMN data DROP NOT NULL;
