-- An allow-list the admin set is the admin's: the instance's own token may only narrow
-- it (every entry inside one the admin allowed), never widen or remove it.
ALTER TABLE instances ADD COLUMN ip_allowlist_locked BOOLEAN NOT NULL DEFAULT FALSE;
