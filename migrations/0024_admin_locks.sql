-- What the admin set, the instance's token cannot undo (as `ip_allowlist_locked` does for
-- the allow-list): `pacing_locked` once the admin set `min_interval_ms` or
-- `max_per_minute` (the token may then only slow the instance down), `risk_policy_locked`
-- once the admin set `risk_policy` (the token may then only make it stricter than it is,
-- and not return it to the deployment's with `null`). Who set the values of existing
-- instances is not known: their overrides and unsafe pacing (admin-only) count as set by
-- the admin.
ALTER TABLE instances
    ADD COLUMN pacing_locked BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN risk_policy_locked BOOLEAN NOT NULL DEFAULT false;
UPDATE instances SET pacing_locked = unsafe_pacing, risk_policy_locked = (risk_policy IS NOT NULL)
 WHERE unsafe_pacing OR risk_policy IS NOT NULL;
