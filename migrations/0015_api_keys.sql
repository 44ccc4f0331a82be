-- Restricted API keys of an instance: a scope (read_only or send_only), an optional
-- expiry and IP allow-list of their own. The token is shown once and kept only as its
-- SHA-256; a revoked key's row is deleted. last_used_at is written when a pod looks the
-- key up (at most once per token-cache TTL per pod), so it is accurate to about 5 s.
CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    instance_id   TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    scope         TEXT NOT NULL CHECK (scope IN ('read_only', 'send_only')),
    token_hash    TEXT NOT NULL UNIQUE,
    ip_allowlist  TEXT[] NOT NULL DEFAULT '{}',
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at    TIMESTAMPTZ,
    last_used_at  TIMESTAMPTZ
);
CREATE INDEX api_keys_instance_idx ON api_keys (instance_id, id);
