//! Secrets kept encrypted at rest (the attendant's provider keys and webhook secrets):
//! AES-256-GCM (`aes-gcm`), a random nonce per secret, and the owner's id as associated
//! data, so a sealed value copied to another row does not open. The key comes from the
//! deployment's `secrets_key`, or is derived from its admin token with HKDF-SHA256.

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine;

use crate::Config;

const NONCE: usize = 12;

/// Decodes a configured key: 32 bytes in base64 (standard or URL-safe alphabet).
pub fn decode_key(b64: &str) -> Option<[u8; 32]> {
    let t = b64.trim();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(t)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(t.trim_end_matches('=')))
        .ok()?;
    bytes.try_into().ok()
}

/// Seals and opens secrets with the deployment's key.
#[derive(Clone)]
pub struct Sealer(Aes256Gcm);

impl Sealer {
    pub fn new(key: [u8; 32]) -> Sealer {
        Sealer(Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&key)))
    }

    /// The deployment's sealer: `secrets_key`, else a key derived from `admin_token`;
    /// `None` when it has neither.
    pub fn from_config(config: &Config) -> Option<Sealer> {
        if let Some(k) = config.secrets_key.as_deref() {
            return decode_key(k).map(Sealer::new);
        }
        let token = config.admin_token.as_deref()?;
        let mut key = [0u8; 32];
        hkdf::Hkdf::<sha2::Sha256>::new(Some(b"paceline"), token.as_bytes())
            .expand(b"secrets-v1", &mut key)
            .expect("32 bytes is a valid HKDF length");
        Some(Sealer::new(key))
    }

    /// `nonce || ciphertext` of `plain`, bound to `owner`.
    pub fn seal(&self, owner: &str, plain: &[u8]) -> Vec<u8> {
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let ct = self.0.encrypt(&nonce, Payload { msg: plain, aad: owner.as_bytes() }).expect("encryption never fails");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&ct);
        out
    }

    /// The plaintext of a sealed value, if it was sealed with this key for `owner`.
    pub fn open(&self, owner: &str, sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < NONCE {
            return None;
        }
        let (nonce, ct) = sealed.split_at(NONCE);
        self.0.decrypt(Nonce::from_slice(nonce), Payload { msg: ct, aad: owner.as_bytes() }).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_only_with_its_key_and_owner() {
        let s = Sealer::new([7; 32]);
        let sealed = s.seal("inst_a", b"sk-secret");
        assert!(!sealed.windows(9).any(|w| w == b"sk-secret"), "the plaintext is not in the sealed value");
        assert_eq!(s.open("inst_a", &sealed).unwrap(), b"sk-secret");
        assert!(s.open("inst_b", &sealed).is_none(), "another owner's row does not open it");
        assert!(Sealer::new([8; 32]).open("inst_a", &sealed).is_none(), "another key does not open it");
        assert_ne!(s.seal("inst_a", b"sk-secret"), sealed, "a fresh nonce each time");
    }

    #[test]
    fn the_key_comes_from_config_or_the_admin_token() {
        let key = base64::engine::general_purpose::STANDARD.encode([3u8; 32]);
        assert_eq!(decode_key(&key), Some([3; 32]));
        assert_eq!(decode_key("c2hvcnQ="), None);
        let with_token = Config { admin_token: Some("pl_admin_0123456789012345678901234".into()), ..Config::default() };
        let a = Sealer::from_config(&with_token).unwrap();
        let b = Sealer::from_config(&with_token).unwrap();
        assert_eq!(b.open("i", &a.seal("i", b"x")).unwrap(), b"x", "the derived key is stable");
        let explicit = Config { secrets_key: Some(key), ..with_token };
        assert!(Sealer::from_config(&explicit).unwrap().open("i", &a.seal("i", b"x")).is_none());
        assert!(Sealer::from_config(&Config::default()).is_none());
    }
}
