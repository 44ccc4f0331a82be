-- An instance's own ban-risk policies (README, "Ban risk"): each field present replaces
-- the deployment's (thresholds, slowdown, auto_pause, hold_first_contacts). NULL: the
-- deployment's policies.
ALTER TABLE instances ADD COLUMN risk_policy JSONB;
