-- The WhatsApp client's session store (the whatsapp-rust `Backend`), per instance, in
-- Postgres so any worker resumes any instance. One key-value table: `kind` names what
-- the value is (identity, session, prekey, sender key, app-state key or version, device,
-- LID mapping, pending inbound, ...), `key` is the crate's own key for it (an address,
-- an id), and `value` its bytes. Every write is fenced on the writer's lease epoch
-- (`instances.owner_epoch`): an ex-owner can never overwrite the new owner's state.
CREATE TABLE wa_store (
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    kind         TEXT NOT NULL,
    key          TEXT NOT NULL,
    value        BYTEA NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, kind, key)
);
