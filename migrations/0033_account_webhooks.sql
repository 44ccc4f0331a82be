-- Webhooks of an account: they receive the events of all its instances (each payload
-- names its instance). A webhook belongs to one instance or one account.
ALTER TABLE webhooks
    ALTER COLUMN instance_id DROP NOT NULL,
    ADD COLUMN account_id TEXT REFERENCES accounts (id) ON DELETE CASCADE,
    ADD CONSTRAINT webhooks_one_owner CHECK ((instance_id IS NULL) <> (account_id IS NULL));
CREATE INDEX webhooks_account_idx ON webhooks (account_id, id) WHERE account_id IS NOT NULL;
