-- Retention (db::retention) keeps an event while any delivery still refers to it, so a
-- delivery made late (a backlog, a resend) never outlives its payload; this index lets
-- that check find deliveries by event. (On a large deployment, build it first by hand
-- with CREATE INDEX CONCURRENTLY; IF NOT EXISTS then makes this a no-op.)
CREATE INDEX IF NOT EXISTS webhook_deliveries_event_idx ON webhook_deliveries (event_id);
