-- An instance's state changes, newest first (GET {inst}/states): its `instance.state`
-- events, kept as long as events are (7 days). (On a large deployment, build it first by
-- hand with CREATE INDEX CONCURRENTLY; IF NOT EXISTS then makes this a no-op.)
CREATE INDEX IF NOT EXISTS outbox_states_idx ON outbox (instance_id, created_at DESC, id DESC)
    WHERE type = 'instance.state';
