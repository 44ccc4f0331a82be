//! Token formats. Tokens are random, shown once, and stored only as a SHA-256 hash
//! (tokens carry 256 bits of entropy, so a fast hash is enough: nothing to brute-force).

use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Prefix of the admin token.
pub const ADMIN_TOKEN_PREFIX: &str = "pl_admin_";
/// Prefix of instance tokens.
pub const INSTANCE_TOKEN_PREFIX: &str = "pl_inst_";
/// Prefix of restricted API keys.
pub const API_KEY_PREFIX: &str = "pl_key_";
/// Prefix of account tokens.
pub const ACCOUNT_TOKEN_PREFIX: &str = "pl_acct_";
/// Prefix of webhook signing secrets (Standard Webhooks form: the rest is base64).
pub const WEBHOOK_SECRET_PREFIX: &str = "whsec_";

/// A new webhook signing secret: `whsec_` + base64 of 32 random bytes (the Standard
/// Webhooks form, which their verifiers accept as is).
pub fn generate_webhook_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{WEBHOOK_SECRET_PREFIX}{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// What a bearer token claims to be, from its prefix alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Admin,
    Instance,
    ApiKey,
    Account,
}

impl TokenKind {
    pub fn of(token: &str) -> Option<TokenKind> {
        if token.starts_with(ADMIN_TOKEN_PREFIX) {
            Some(TokenKind::Admin)
        } else if token.starts_with(INSTANCE_TOKEN_PREFIX) {
            Some(TokenKind::Instance)
        } else if token.starts_with(API_KEY_PREFIX) {
            Some(TokenKind::ApiKey)
        } else if token.starts_with(ACCOUNT_TOKEN_PREFIX) {
            Some(TokenKind::Account)
        } else {
            None
        }
    }
}

/// A new random token with the given prefix: 32 random bytes, base64url without padding.
pub fn generate_token(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{prefix}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The stored form of a token: lowercase hex SHA-256.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Whether `s` has the admin token's form.
pub fn valid_admin_token(s: &str) -> bool {
    s.strip_prefix(ADMIN_TOKEN_PREFIX).is_some_and(|rest| {
        rest.len() >= 24 && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

/// Compares a presented token with the configured admin token without an early exit
/// that would leak how many leading characters matched.
pub fn admin_token_matches(presented: &str, configured: &str) -> bool {
    let a = Sha256::digest(presented.as_bytes());
    let b = Sha256::digest(configured.as_bytes());
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_prefixed_random_and_hash_stably() {
        let a = generate_token(INSTANCE_TOKEN_PREFIX);
        let b = generate_token(INSTANCE_TOKEN_PREFIX);
        assert_ne!(a, b);
        assert_eq!(TokenKind::of(&a), Some(TokenKind::Instance));
        assert_eq!(a.len(), INSTANCE_TOKEN_PREFIX.len() + 43);
        assert_eq!(hash_token(&a), hash_token(&a));
        assert_ne!(hash_token(&a), hash_token(&b));
        assert!(!hash_token(&a).contains(&a[INSTANCE_TOKEN_PREFIX.len()..]));
    }

    #[test]
    fn admin_token_form_and_match() {
        let t = generate_token(ADMIN_TOKEN_PREFIX);
        assert!(valid_admin_token(&t));
        assert!(!valid_admin_token("pl_admin_short"));
        assert!(!valid_admin_token(&t.replace("pl_admin_", "pl_inst_")));
        assert!(admin_token_matches(&t, &t));
        assert!(!admin_token_matches(&format!("{t}x"), &t));
        assert_eq!(TokenKind::of("Bearer x"), None);
    }
}
