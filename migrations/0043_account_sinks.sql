-- An account's event sink (issue #39): one sink for the events of every instance the
-- account holds (each event the account's if the instance was in it when the event was
-- made). The key column now holds the owner's id, an instance's or an account's (their
-- ids never look alike); the owner is also in a column of its own, so deleting it
-- deletes the sink.
ALTER TABLE event_sinks RENAME COLUMN instance_id TO owner_id;
ALTER TABLE event_sinks DROP CONSTRAINT event_sinks_instance_id_fkey;
ALTER TABLE event_sinks
    ADD COLUMN instance_id TEXT REFERENCES instances (id) ON DELETE CASCADE,
    ADD COLUMN account_id TEXT REFERENCES accounts (id) ON DELETE CASCADE;
UPDATE event_sinks SET instance_id = owner_id;
ALTER TABLE event_sinks ADD CONSTRAINT event_sinks_one_owner
    CHECK ((instance_id IS NULL) <> (account_id IS NULL) AND owner_id = COALESCE(instance_id, account_id));
