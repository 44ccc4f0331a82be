-- An instance's token, sealed (AES-256-GCM under the deployment's secrets key, bound to
-- the instance's id) so the admin and the instance's account can be shown it again, as
-- Evolution's fetchInstances shows tokens. `token_hash` stays what authenticates; a token
-- made before this migration, or while the deployment had no secrets key, has none and
-- is shown as null until it is rotated (POST /v1/instances/{id}/token).
ALTER TABLE instances ADD COLUMN token_sealed BYTEA;
