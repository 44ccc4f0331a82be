-- Media bytes in object storage: a row whose `object_key` is set has its bytes in the
-- deployment's bucket under that key (ids only, never a phone number) instead of in
-- `media_chunks`. Rows of both kinds live side by side: switching the backend moves no
-- bytes (`paceline media migrate --to s3` does).
ALTER TABLE media ADD COLUMN object_key TEXT;

-- Objects to delete from the bucket. A row that goes (collected, its instance deleted,
-- an upload aborted) or gives its bytes back (expired, migrated back) queues its object
-- here in the same transaction, by trigger, whatever the path; the collector deletes the
-- objects in batches and then their entries. So no object outlives its row for long, and
-- a bucket that is down delays deletions without losing them.
CREATE TABLE media_object_deletions (
    key        TEXT PRIMARY KEY,
    queued_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempts   INTEGER NOT NULL DEFAULT 0
);

CREATE FUNCTION media_object_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO media_object_deletions (key) VALUES (OLD.object_key) ON CONFLICT (key) DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER media_object_deleted AFTER DELETE ON media
    FOR EACH ROW WHEN (OLD.object_key IS NOT NULL) EXECUTE FUNCTION media_object_gone();
CREATE TRIGGER media_object_released AFTER UPDATE OF object_key ON media
    FOR EACH ROW WHEN (OLD.object_key IS NOT NULL AND NEW.object_key IS DISTINCT FROM OLD.object_key)
    EXECUTE FUNCTION media_object_gone();
