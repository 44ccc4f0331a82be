-- Media bytes in chunks of 1 MiB, so an upload is stored and a download served a chunk
-- at a time: no pod holds a whole file in memory (a 100 MB document was read whole on
-- every GET /media/{id}).
CREATE TABLE media_chunks (
    media_id  TEXT NOT NULL REFERENCES media (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    data      BYTEA NOT NULL,
    PRIMARY KEY (media_id, seq)
);
-- Media is mostly compressed already (JPEG, MP4, Opus): store chunks out of line as they
-- are, without Postgres trying (and failing) to compress each one.
ALTER TABLE media_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

INSERT INTO media_chunks (media_id, seq, data)
SELECT m.id, g.seq, substring(m.data FROM g.seq * 1048576 + 1 FOR 1048576)
FROM media m
CROSS JOIN LATERAL generate_series(0, (length(m.data) - 1) / 1048576) AS g(seq)
WHERE m.data IS NOT NULL AND length(m.data) > 0;

ALTER TABLE media DROP COLUMN data;

-- A row is claimed once a queued or logged message refers to it. Rows never claimed (an
-- idempotent replay, a failed insert, a crash between storing and queueing) are
-- collected after an hour. Rows from before this migration are all referred to.
ALTER TABLE media ADD COLUMN claimed BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE media ALTER COLUMN claimed SET DEFAULT FALSE;
CREATE INDEX media_unclaimed_idx ON media (created_at) WHERE NOT claimed;
-- Media past its retention gives its bytes back (the row stays, expired: 410).
CREATE INDEX media_retention_idx ON media (created_at) WHERE NOT expired;

-- Bytes each instance stores, against its media quota; kept by a trigger on media so
-- every path that stores or removes media counts.
CREATE TABLE media_usage (
    instance_id  TEXT PRIMARY KEY REFERENCES instances (id) ON DELETE CASCADE,
    bytes        BIGINT NOT NULL DEFAULT 0
);

INSERT INTO media_usage (instance_id, bytes)
SELECT instance_id, sum(size) FROM media GROUP BY instance_id;

CREATE FUNCTION media_usage_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO media_usage (instance_id, bytes) VALUES (NEW.instance_id, NEW.size)
        ON CONFLICT (instance_id) DO UPDATE SET bytes = media_usage.bytes + EXCLUDED.bytes;
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.size <> OLD.size THEN
            UPDATE media_usage SET bytes = bytes + NEW.size - OLD.size WHERE instance_id = NEW.instance_id;
        END IF;
    ELSE
        -- No insert here: when the instance itself is being deleted its usage row goes too.
        UPDATE media_usage SET bytes = bytes - OLD.size WHERE instance_id = OLD.instance_id;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER media_usage_count AFTER INSERT OR DELETE OR UPDATE OF size ON media
    FOR EACH ROW EXECUTE FUNCTION media_usage_count();
