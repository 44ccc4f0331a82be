-- Instances: one messaging-network account each. The row is the source of truth for the
-- instance's settings and state; workers write state only under their lease epoch
-- (owner_epoch), see ARCHITECTURE.md.
CREATE TABLE instances (
    id               TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    token_hash       TEXT NOT NULL,
    state            TEXT NOT NULL DEFAULT 'disconnected',
    tags             TEXT[] NOT NULL DEFAULT '{}',
    ip_allowlist     TEXT[] NOT NULL DEFAULT '{}',
    min_interval_ms  INTEGER NOT NULL,
    max_per_minute   INTEGER NOT NULL,
    unsafe_pacing    BOOLEAN NOT NULL DEFAULT FALSE,
    proxy_url        TEXT,
    reject_call      BOOLEAN NOT NULL DEFAULT FALSE,
    msg_call         TEXT NOT NULL DEFAULT '',
    phone            TEXT,
    account_type     TEXT,
    -- Lease epoch of the worker that owns the instance (0: never owned).
    owner_epoch      BIGINT NOT NULL DEFAULT 0,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT instances_name_key UNIQUE (name),
    CONSTRAINT instances_token_hash_key UNIQUE (token_hash),
    CONSTRAINT instances_state_check CHECK (state IN
        ('disconnected', 'qr_pending', 'connecting', 'connected', 'logged_out', 'banned')),
    CONSTRAINT instances_account_type_check CHECK (account_type IN ('personal', 'business')),
    CONSTRAINT instances_pacing_check CHECK (min_interval_ms >= 0 AND max_per_minute >= 1)
);

-- Filters of GET /v1/instances, each with id for keyset pagination.
CREATE INDEX instances_tags_idx ON instances USING GIN (tags);
CREATE INDEX instances_state_id_idx ON instances (state, id);
