-- An instance's past memberships of accounts: written when it leaves one (moved out, or
-- deleted). The dispatcher gives each event to the webhooks of the account that held its
-- instance when the event was made, so an event still in flight when its instance moves
-- or goes reaches that account, and never the next one. Kept past the events' retention
-- only as long as events may still be in flight, then pruned with them.
CREATE TABLE account_departures (
    instance_id TEXT NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    -- The instance's name when it left (an Evolution-format payload names it).
    name TEXT NOT NULL,
    joined_at TIMESTAMPTZ NOT NULL,
    left_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX account_departures_instance_idx ON account_departures (instance_id, left_at);
CREATE INDEX account_departures_left_idx ON account_departures (left_at);
