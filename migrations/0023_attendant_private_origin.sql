-- The admin's `allow_private_targets` holds for the provider address it was given with:
-- `private_origin` is that URL's origin (scheme://host[:port]). A change of origin by
-- anyone but the admin clears the flag, and the attendant calls a private address only
-- while the provider's origin is this one.
ALTER TABLE attendants ADD COLUMN private_origin TEXT;
UPDATE attendants
   SET private_origin = substring(COALESCE(config -> 'provider' ->> 'base_url', config -> 'provider' ->> 'url')
                                  FROM '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]+')
 WHERE allow_private;
