-- Hosted pairing links: a page on the operator's server where a customer pairs their
-- phone without seeing a token. The link's token is in its URL and kept only as its
-- SHA-256. A link works until it expires, is revoked (all of an instance's at once),
-- or is used (the instance was seen connected through it); then never again.
CREATE TABLE pairing_links (
    id           TEXT PRIMARY KEY,
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at   TIMESTAMPTZ NOT NULL,
    used_at      TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ
);
CREATE INDEX pairing_links_instance_idx ON pairing_links (instance_id);
