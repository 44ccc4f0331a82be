-- Labels of business accounts (interface.md 4.4), as the network last told us or as
-- the API changed them: the label itself, and what it is applied to. Chat and message
-- routes show them from here; label.updated is emitted only when a row changes, so a
-- change the network echoes back is not announced twice.
CREATE TABLE labels (
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    label_id     TEXT NOT NULL,
    name         TEXT NOT NULL,
    color        INTEGER NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, label_id)
);

-- A label on a chat (wa_message_id '') or on one message of it (by the network's id).
CREATE TABLE label_targets (
    instance_id    TEXT NOT NULL,
    label_id       TEXT NOT NULL,
    chat_jid       TEXT NOT NULL,
    wa_message_id  TEXT NOT NULL DEFAULT '',
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, label_id, chat_jid, wa_message_id),
    FOREIGN KEY (instance_id, label_id) REFERENCES labels (instance_id, label_id) ON DELETE CASCADE
);
-- The chat and message routes: the labels of these chats or messages.
CREATE INDEX label_targets_chat_idx ON label_targets (instance_id, chat_jid, wa_message_id);
