-- Why an instance is in its state when that needs saying (e.g. "temporarily banned until
-- ..."); cleared by the next state change.
ALTER TABLE instances ADD COLUMN state_reason TEXT;
