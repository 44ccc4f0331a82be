//! The console's session: a cookie sealed with the deployment's key (AES-256-GCM, the
//! same `shared::sealed` that keeps stored secrets), holding the token, who it is, a CSRF
//! token and when it was last used. HttpOnly and SameSite=Strict; a session idle for the
//! configured time, or older than [`ABSOLUTE`], reads as none. Before sign-in, a second
//! sealed cookie carries the sign-in form's CSRF token (double submit). Served anywhere
//! but on loopback (or with `console.secure_cookie`), both are `Secure` and named with the
//! `__Host-` prefix, so no plain-HTTP page and no other host or path can set them.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use cookie::{Cookie, SameSite};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use shared::sealed::Sealer;
use subtle::ConstantTimeEq;

/// The console's two cookies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jar {
    /// The session.
    Session,
    /// The sign-in form's CSRF token.
    SignIn,
}
/// No session lasts longer than this, however busy.
pub const ABSOLUTE: Duration = Duration::from_secs(12 * 3600);
/// The associated data each cookie is sealed under: one kind never opens as the other.
const SESSION_AAD: &str = "console-session";
const SIGN_IN_AAD: &str = "console-sign-in";
/// The most of a cookie the console reads.
const MAX_COOKIE: usize = 4096;

/// Who signed in, as `GET /v1/me` said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Who {
    /// `admin`, `instance`, `api_key` or `account`.
    pub kind: String,
    #[serde(default)]
    pub instance_id: Option<String>,
    /// An account token's account.
    #[serde(default)]
    pub account_id: Option<String>,
    #[serde(default)]
    pub account_name: Option<String>,
    #[serde(default)]
    pub instance_name: Option<String>,
    /// An API key's scope: `read_only` or `send_only`.
    #[serde(default)]
    pub scope: Option<String>,
}

impl Who {
    pub fn is_admin(&self) -> bool {
        self.kind == "admin"
    }

    /// An account token: its account's fleet.
    pub fn is_account(&self) -> bool {
        self.kind == "account"
    }

    /// Sees a fleet: the admin (every instance) and an account token (its own).
    pub fn sees_fleet(&self) -> bool {
        self.is_admin() || self.is_account()
    }

    /// May start, stop and pair sessions: the admin, an account's token on its instances
    /// and an instance's own token (a key only reads or sends).
    pub fn can_operate(&self) -> bool {
        matches!(self.kind.as_str(), "admin" | "instance" | "account")
    }

    /// May read the instance: all but a `send_only` key.
    pub fn can_read(&self) -> bool {
        self.scope.as_deref() != Some("send_only")
    }

    /// May queue messages: all but a `read_only` key.
    pub fn can_send(&self) -> bool {
        self.scope.as_deref() != Some("read_only")
    }

    /// Where this token's pages start.
    pub fn home(&self) -> String {
        match &self.instance_id {
            Some(id) if !self.is_admin() && !self.can_read() => format!("/i/{id}/queue"),
            Some(id) if !self.is_admin() => format!("/i/{id}"),
            _ => "/fleet".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    pub token: String,
    pub who: Who,
    pub csrf: String,
    /// Unix seconds: signed in, last used.
    pub since: i64,
    pub seen: i64,
}

impl Session {
    /// The session's id as the list of ended sessions keeps it: a digest of its CSRF token
    /// (random, one per sign-in), so Redis never holds a value a form would take.
    pub fn digest(&self) -> String {
        use sha2::Digest;
        hex::encode(&sha2::Sha256::digest(format!("console-session:{}", self.csrf).as_bytes())[..16])
    }
}

#[derive(Serialize, Deserialize)]
struct SignIn {
    csrf: String,
    at: i64,
}

#[derive(Clone)]
pub struct Sessions {
    sealer: Sealer,
    idle: Duration,
    secure: bool,
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// 256 random bits, URL-safe.
pub fn random_token() -> String {
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    URL_SAFE_NO_PAD.encode(b)
}

/// Whether a form's CSRF token is the expected one (in constant time).
pub fn csrf_ok(expected: &str, given: &str) -> bool {
    !expected.is_empty() && bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
}

/// The value of cookie `name` in a request's `Cookie` headers.
fn cookie_value(headers: &axum::http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .filter(|h| h.len() <= 4 * MAX_COOKIE)
        .flat_map(|h| Cookie::split_parse(h).filter_map(Result::ok).collect::<Vec<_>>())
        .find(|c| c.name() == name)
        .map(|c| c.value().to_string())
        .filter(|v| v.len() <= MAX_COOKIE)
}

impl Sessions {
    pub fn new(sealer: Sealer, idle: Duration, secure: bool) -> Sessions {
        Sessions { sealer, idle, secure }
    }

    fn seal<T: Serialize>(&self, aad: &str, v: &T) -> String {
        let plain = serde_json::to_vec(v).expect("a session serializes");
        URL_SAFE_NO_PAD.encode(self.sealer.seal(aad, &plain))
    }

    fn open<T: for<'de> Deserialize<'de>>(&self, aad: &str, value: &str) -> Option<T> {
        let sealed = URL_SAFE_NO_PAD.decode(value).ok()?;
        serde_json::from_slice(&self.sealer.open(aad, &sealed)?).ok()
    }

    /// The name of a cookie: `__Host-` prefixed when `Secure`.
    pub fn name(&self, jar: Jar) -> &'static str {
        match (jar, self.secure) {
            (Jar::Session, false) => "pl_console",
            (Jar::Session, true) => "__Host-pl_console",
            (Jar::SignIn, false) => "pl_console_signin",
            (Jar::SignIn, true) => "__Host-pl_console_signin",
        }
    }

    fn cookie(&self, jar: Jar, value: String, max_age: Duration) -> String {
        let name = self.name(jar);
        Cookie::build((name, value))
            .http_only(true)
            .same_site(SameSite::Strict)
            .secure(self.secure)
            .path("/")
            .max_age(cookie::time::Duration::seconds(max_age.as_secs() as i64))
            .build()
            .to_string()
    }

    /// How long `s` has left before its absolute limit (an open event stream ends then).
    pub fn remaining(&self, s: &Session) -> Duration {
        Duration::from_secs((s.since + ABSOLUTE.as_secs() as i64 - now()).max(0) as u64)
    }

    /// Whether the request carries the cookie `jar` (whatever its value).
    pub fn carries(&self, headers: &axum::http::HeaderMap, jar: Jar) -> bool {
        cookie_value(headers, self.name(jar)).is_some()
    }

    /// The request's session, if it has one that is neither idle too long nor too old.
    pub fn read(&self, headers: &axum::http::HeaderMap) -> Option<Session> {
        let s = self.read_unexpired(headers)?;
        (now() - s.seen <= self.idle.as_secs() as i64).then_some(s)
    }

    /// The request's session if it is not past its absolute limit, idle or not: signing
    /// out ends even an idle session (a copy of its cookie may be in use elsewhere).
    pub fn read_unexpired(&self, headers: &axum::http::HeaderMap) -> Option<Session> {
        let s: Session = self.open(SESSION_AAD, &cookie_value(headers, self.name(Jar::Session))?)?;
        (now() - s.since <= ABSOLUTE.as_secs() as i64).then_some(s)
    }

    /// A new session for a token `GET /v1/me` accepted.
    pub fn start(&self, token: String, who: Who) -> Session {
        let t = now();
        Session { token, who, csrf: random_token(), since: t, seen: t }
    }

    /// The `Set-Cookie` of `s`, marked used now: each page keeps its session alive.
    pub fn set_cookie(&self, s: &Session) -> String {
        let s = Session { seen: now(), ..s.clone() };
        self.cookie(Jar::Session, self.seal(SESSION_AAD, &s), self.idle)
    }

    /// The `Set-Cookie` that ends the session (and the sign-in form's).
    pub fn clear(&self, jar: Jar) -> String {
        self.cookie(jar, String::new(), Duration::ZERO)
    }

    /// The sign-in form's CSRF token and its cookie.
    pub fn sign_in_form(&self) -> (String, String) {
        let csrf = random_token();
        let cookie =
            self.cookie(Jar::SignIn, self.seal(SIGN_IN_AAD, &SignIn { csrf: csrf.clone(), at: now() }), self.idle);
        (csrf, cookie)
    }

    /// Whether a sign-in form's CSRF token is the one its cookie carries.
    pub fn sign_in_ok(&self, headers: &axum::http::HeaderMap, given: &str) -> bool {
        let cookie = cookie_value(headers, self.name(Jar::SignIn));
        let Some(s) = cookie.and_then(|v| self.open::<SignIn>(SIGN_IN_AAD, &v)) else {
            return false;
        };
        now() - s.at <= self.idle.as_secs() as i64 && csrf_ok(&s.csrf, given)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{header, HeaderMap, HeaderValue};

    fn sessions() -> Sessions {
        Sessions::new(Sealer::new([3; 32]), Duration::from_secs(600), false)
    }

    fn with_cookie(set_cookie: &str) -> HeaderMap {
        let pair = set_cookie.split(';').next().unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_str(pair).unwrap());
        h
    }

    fn who() -> Who {
        Who {
            kind: "instance".into(),
            instance_id: Some("inst_x".into()),
            account_id: None,
            account_name: None,
            instance_name: None,
            scope: None,
        }
    }

    #[test]
    fn a_session_reads_back_only_sealed_with_its_key_and_kind() {
        let s = sessions();
        let set = s.set_cookie(&s.start("pl_inst_secret".into(), who()));
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"), "{set}");
        assert!(!set.contains("pl_inst_secret"), "the token is sealed: {set}");
        let back = s.read(&with_cookie(&set)).expect("reads back");
        assert_eq!((back.token.as_str(), &back.who), ("pl_inst_secret", &who()));
        // Another key, a tampered value, or the sign-in cookie's value: no session.
        let other = Sessions::new(Sealer::new([4; 32]), Duration::from_secs(600), false);
        assert!(other.read(&with_cookie(&set)).is_none());
        let tampered = set.replacen("pl_console=", "pl_console=A", 1);
        assert!(s.read(&with_cookie(&tampered)).is_none());
        let (_, form) = s.sign_in_form();
        assert!(s.read(&with_cookie(&form.replacen("pl_console_signin", "pl_console", 1))).is_none());
    }

    #[test]
    fn an_idle_or_old_session_is_over() {
        let s = sessions();
        let mut idle = s.start("t".into(), who());
        idle.seen -= 601;
        let set = s.cookie(Jar::Session, s.seal(SESSION_AAD, &idle), s.idle);
        assert!(s.read(&with_cookie(&set)).is_none(), "idle past the timeout");
        let mut old = s.start("t".into(), who());
        old.since -= ABSOLUTE.as_secs() as i64 + 1;
        let set = s.cookie(Jar::Session, s.seal(SESSION_AAD, &old), s.idle);
        assert!(s.read(&with_cookie(&set)).is_none(), "older than the absolute limit");
        // set_cookie renews `seen`.
        let set = s.set_cookie(&idle);
        assert!(s.read(&with_cookie(&set)).is_some());
    }

    #[test]
    fn secure_cookies_are_host_only() {
        let s = Sessions::new(Sealer::new([3; 32]), Duration::from_secs(600), true);
        let set = s.set_cookie(&s.start("t".into(), who()));
        assert!(set.starts_with("__Host-pl_console=") && set.contains("Secure") && set.contains("Path=/"), "{set}");
        assert!(!set.contains("Domain"), "{set}");
        assert!(s.read(&with_cookie(&set)).is_some());
        let plain = sessions().set_cookie(&sessions().start("t".into(), who()));
        assert!(s.read(&with_cookie(&plain)).is_none(), "a cookie without the prefix is not read");
        assert!(s.clear(Jar::SignIn).starts_with("__Host-pl_console_signin=;"));
    }

    #[test]
    fn the_sign_in_form_checks_its_cookie() {
        let s = sessions();
        let (csrf, set) = s.sign_in_form();
        let h = with_cookie(&set);
        assert!(s.sign_in_ok(&h, &csrf));
        assert!(!s.sign_in_ok(&h, "forged"));
        assert!(!s.sign_in_ok(&HeaderMap::new(), &csrf), "no cookie");
        assert!(!csrf_ok("", ""), "an empty token never matches");
    }
}
