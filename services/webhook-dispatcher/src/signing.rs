//! Standard Webhooks signing (<https://www.standardwebhooks.com>): the signed content is
//! `{webhook-id}.{webhook-timestamp}.{body}`, the key is the secret after `whsec_`
//! base64-decoded, and each signature is `v1,<base64 HMAC-SHA256>`. While a rotated-out
//! secret is still honoured, the header carries one signature per secret, space-separated,
//! so receivers holding either secret verify.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// `v1,<signature>` of one message under one secret; `None` for a secret that is not
/// `whsec_` + base64 (it is never logged).
pub fn sign(secret: &str, msg_id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = STANDARD.decode(secret.strip_prefix("whsec_").unwrap_or(secret)).ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes())))
}

/// The `webhook-signature` header value under each of `secrets`.
pub fn signature_header(secrets: &[&str], msg_id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let sigs: Vec<String> = secrets.iter().filter_map(|s| sign(s, msg_id, timestamp, body)).collect();
    (!sigs.is_empty()).then(|| sigs.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification and its reference libraries.
    #[test]
    fn matches_the_specification_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let ts = 1614265330;
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(sign(secret, id, ts, body).unwrap(), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn one_signature_per_secret_and_bad_secrets_are_skipped() {
        let a = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let b = "whsec_dGhlIHByZXZpb3VzIHNlY3JldCBvZiB0aGUgZW5kcG9pbnQ=";
        let h = signature_header(&[a, b], "evt_1", 1, b"{}").unwrap();
        let parts: Vec<&str> = h.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], sign(a, "evt_1", 1, b"{}").unwrap());
        assert_ne!(parts[0], parts[1]);
        assert_eq!(signature_header(&["whsec_!!!"], "evt_1", 1, b"{}"), None);
    }
}
