//! Signed media URLs: `/media/{med_id}?exp=<unix seconds>&sig=<hex HMAC-SHA256>` over
//! `"{med_id}.{exp}"`. The key is derived from the admin token (every API pod has it), so
//! any pod verifies any pod's URLs, and rotating the admin token invalidates them all.
//! URLs are absolute: under `public_url`, or the listen address when it is loopback;
//! listening beyond loopback without `public_url`, signed URLs are disabled.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How long a signed URL stays valid.
pub const TTL: chrono::Duration = chrono::Duration::hours(1);

pub struct MediaUrls {
    key: Vec<u8>,
    /// `public_url` without its trailing slash.
    public: Option<String>,
    /// The listen address when it is loopback (URLs then point at it).
    local: Option<String>,
}

impl MediaUrls {
    /// Without an admin token (the attendant role) no URL is signed or verified.
    pub fn new(config: &shared::Config, admin_token: Option<&str>) -> MediaUrls {
        let Some(admin_token) = admin_token else {
            return MediaUrls { key: Vec::new(), public: None, local: None };
        };
        let mut mac = Hmac::<Sha256>::new_from_slice(admin_token.as_bytes()).expect("any key length");
        mac.update(b"paceline media url key v1");
        let key = mac.finalize().into_bytes().to_vec();
        MediaUrls {
            key,
            public: config.public_url.as_ref().map(|u| u.as_str().trim_end_matches('/').to_string()),
            local: config.listen_addr.ip().is_loopback().then(|| format!("http://{}", config.listen_addr)),
        }
    }

    /// Where the API is reached from outside: `public_url`, or the listen address when it
    /// is loopback (signed media URLs and pairing links are built on it).
    pub fn base(&self) -> Option<&str> {
        self.public.as_deref().or(self.local.as_deref())
    }

    /// Whether URLs can be handed out (and served).
    pub fn enabled(&self) -> bool {
        self.base().is_some()
    }

    fn mac(&self, id: &str, exp: i64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(exp.to_string().as_bytes());
        mac
    }

    /// A URL for `id` valid until now + TTL; `None` when disabled.
    pub fn sign(&self, id: &str, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
        let base = self.base()?;
        let exp = (now + TTL).timestamp();
        let sig = hex::encode(self.mac(id, exp).finalize().into_bytes());
        Some(format!("{base}/media/{id}?exp={exp}&sig={sig}"))
    }

    /// Whether `sig` is this deployment's signature of (`id`, `exp`) and `exp` has not passed.
    pub fn verify(&self, id: &str, exp: i64, sig: &str, now: chrono::DateTime<chrono::Utc>) -> bool {
        let Ok(sig) = hex::decode(sig) else { return false };
        if self.key.is_empty() {
            return false;
        }
        exp >= now.timestamp() && self.mac(id, exp).verify_slice(&sig).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls() -> MediaUrls {
        let config = shared::Config::default();
        MediaUrls::new(&config, Some("pl_admin_aaaaaaaaaaaaaaaaaaaaaaaaaaaa"))
    }

    #[test]
    fn signatures_verify_and_expire_and_resist_tampering() {
        let u = urls();
        let now = chrono::Utc::now();
        let url = url::Url::parse(&u.sign("med_1", now).unwrap()).unwrap();
        let q: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        let exp: i64 = q["exp"].parse().unwrap();
        assert!(u.verify("med_1", exp, &q["sig"], now));
        assert!(!u.verify("med_2", exp, &q["sig"], now), "another media");
        assert!(!u.verify("med_1", exp + 1, &q["sig"], now), "another expiry");
        assert!(!u.verify("med_1", exp, "00", now), "another signature");
        assert!(!u.verify("med_1", exp, &q["sig"], now + TTL + chrono::Duration::seconds(1)), "expired");
        let other = MediaUrls::new(&shared::Config::default(), Some("pl_admin_bbbbbbbbbbbbbbbbbbbbbbbbbbbb"));
        assert!(!other.verify("med_1", exp, &q["sig"], now), "another deployment's key");
    }

    #[test]
    fn disabled_beyond_loopback_without_public_url() {
        let mut config = shared::Config { listen_addr: ([0, 0, 0, 0], 8787).into(), ..Default::default() };
        assert!(!MediaUrls::new(&config, Some("pl_admin_x")).enabled());
        config.public_url = Some(url::Url::parse("https://gw.example.com/").unwrap());
        let u = MediaUrls::new(&config, Some("pl_admin_x"));
        assert!(u.sign("med_1", chrono::Utc::now()).unwrap().starts_with("https://gw.example.com/media/med_1?exp="));
    }
}
