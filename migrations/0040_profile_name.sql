-- The account's own profile (push) name as the session last reported it, so lists can
-- show it without asking the network (Evolution's fetchInstances `profileName`).
ALTER TABLE instances ADD COLUMN profile_name text;
