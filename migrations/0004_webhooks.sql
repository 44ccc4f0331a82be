-- Webhook endpoints of an instance. The secret signs deliveries (Standard Webhooks), so
-- it is kept as issued; the previous one stays valid for a while after a rotation.
CREATE TABLE webhooks (
    id                TEXT PRIMARY KEY,
    instance_id       TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    url               TEXT NOT NULL,
    -- Event types delivered; empty means every type.
    events            TEXT[] NOT NULL DEFAULT '{}',
    secret            TEXT NOT NULL,
    previous_secret   TEXT,
    secret_rotated_at TIMESTAMPTZ,
    enabled           BOOLEAN NOT NULL DEFAULT TRUE,
    disabled_reason   TEXT,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_instance_idx ON webhooks (instance_id, id);
