-- When an instance joined its account, to the microsecond: an account's event stream lets
-- through an instance's events from then on only (a moved instance's earlier events stay
-- its earlier account's).
ALTER TABLE instances ADD COLUMN account_joined_at TIMESTAMPTZ;
UPDATE instances SET account_joined_at = created_at WHERE account_id IS NOT NULL;
