-- The outbox relay no longer rewrites each event's wide row to mark it published (#38:
-- that update wrote a new 1 KB row version and its index entries for every event, about
-- a sixth of Postgres's time per accepted message).
--
-- Each event now carries the id of the transaction that wrote it (`xid`, set by
-- default). The relay publishes in batches of commits told apart by Postgres snapshots,
-- as PgQ does: a batch is every event visible in a new snapshot and not in the last one
-- published (`outbox_relay`), read a page at a time in `(xid, id)` order. Nothing is
-- marked per event but the stream sequence JetStream gave it, in a narrow insert-only
-- table (`outbox_published`, read to resume the real-time stream after an event).
--
-- Needs PostgreSQL 13 or later (xid8, pg_snapshot).
ALTER TABLE outbox ADD COLUMN xid xid8;
-- Events not yet published when this runs are published by the new relay: they carry
-- this transaction's id, which the first snapshot below does not see, and the epoch as
-- their old mark, so an earlier build's relay does not publish (and count) them too.
UPDATE outbox SET xid = pg_current_xact_id(), published_at = 'epoch' WHERE published_at IS NULL;
ALTER TABLE outbox ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
-- A relay of an earlier build (a rolling upgrade) publishes rows whose `published_at` is
-- NULL: new rows carry the epoch there, so it leaves them to this one. The column (and
-- `stream_seq`) stay for those builds; nothing of this one reads them.
ALTER TABLE outbox ALTER COLUMN published_at SET DEFAULT 'epoch';
CREATE INDEX outbox_xid_idx ON outbox (xid, id) WHERE xid IS NOT NULL;

-- The stream sequence of each published event (the first one JetStream gave it).
CREATE TABLE outbox_published (
    event_id    TEXT PRIMARY KEY,
    stream_seq  BIGINT NOT NULL
);
INSERT INTO outbox_published (event_id, stream_seq)
    SELECT id, stream_seq FROM outbox WHERE published_at IS NOT NULL AND stream_seq IS NOT NULL;

-- The relay's position: every event visible in `done` is published; `batch` (with the
-- page cursor `after_xid`, `after_id`) is the snapshot being published.
CREATE TABLE outbox_relay (
    id          INT PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    done        pg_snapshot NOT NULL,
    batch       pg_snapshot,
    after_xid   xid8,
    after_id    TEXT
);
-- The first `done` sees no transaction from the oldest one running now (this one among
-- them) on: the events this one marked above, and those of transactions still running,
-- are to publish; every other row carries no transaction id and is not read.
INSERT INTO outbox_relay (done)
SELECT format('%s:%s:', m, m)::pg_snapshot
FROM (SELECT least(pg_snapshot_xmin(pg_current_snapshot()), pg_current_xact_id()) AS m) c;
