-- Retention by direction: media received (inbound) and sent (outbound) expire after their
-- own number of days, the deployment's unless an instance or its account says otherwise.
-- Media stored before this migration has no direction and keeps the longer of the two.
ALTER TABLE media ADD COLUMN inbound BOOLEAN;
ALTER TABLE instances
    ADD COLUMN media_retention_inbound_days INTEGER CHECK (media_retention_inbound_days BETWEEN 1 AND 3650),
    ADD COLUMN media_retention_outbound_days INTEGER CHECK (media_retention_outbound_days BETWEEN 8 AND 3650);
ALTER TABLE accounts
    ADD COLUMN media_retention_inbound_days INTEGER CHECK (media_retention_inbound_days BETWEEN 1 AND 3650),
    ADD COLUMN media_retention_outbound_days INTEGER CHECK (media_retention_outbound_days BETWEEN 8 AND 3650);
