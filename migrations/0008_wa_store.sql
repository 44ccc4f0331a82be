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
    -- When the value was written (what "older than" sweeps of sent messages, pending
    -- inbound messages and base keys compare), and for message secrets their expiry.
    written_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at   BIGINT,
    PRIMARY KEY (instance_id, kind, key)
);
CREATE INDEX wa_store_expiry_idx ON wa_store (instance_id, kind, expires_at) WHERE expires_at IS NOT NULL;
