-- The attendant's per-instance budget (replies and tokens per hour and per day) is read
-- from its replies by time: an index by instance and time.
CREATE INDEX attendant_replies_time_idx ON attendant_replies (instance_id, created_at);
