//! Sign-in attempts per client address: at most [`MAX_ATTEMPTS`] that fail within
//! [`WINDOW`]; past them an address may not try again until the window ends (429 with
//! `Retry-After`). An attempt counts when it starts (so parallel requests cannot all pass
//! the check before any is recorded) and is forgiven when its token is accepted; a
//! success forgives only itself, so guesses cannot hide between good sign-ins. The
//! address is the client's as `api.trusted_proxies` and `api.client_ip_header` tell it
//! (the API's own rule), an IPv6 client counts by its /64. Per console process, and at
//! most [`MAX_ADDRESSES`] addresses are remembered.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const MAX_ATTEMPTS: u32 = 10;
pub const WINDOW: Duration = Duration::from_secs(60);
pub const MAX_ADDRESSES: usize = 10_000;

#[derive(Default)]
pub struct SignIns {
    attempts: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

/// The key an address counts under: itself, or its /64 for IPv6.
fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

impl SignIns {
    /// Starts an attempt from `ip`: counted now, or refused with how long to wait.
    pub fn attempt(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        let ip = key(ip);
        let mut map = self.attempts.lock().expect("the sign-in limiter's lock");
        if map.len() >= MAX_ADDRESSES && !map.contains_key(&ip) {
            map.retain(|_, (since, _)| now.saturating_duration_since(*since) < WINDOW);
            if map.len() >= MAX_ADDRESSES {
                // Full of fresh windows: the oldest goes.
                if let Some(oldest) = map.iter().min_by_key(|(_, (since, _))| *since).map(|(k, _)| *k) {
                    map.remove(&oldest);
                }
            }
        }
        let e = map.entry(ip).or_insert((now, 0));
        let elapsed = now.saturating_duration_since(e.0);
        if elapsed >= WINDOW {
            *e = (now, 0);
        } else if e.1 >= MAX_ATTEMPTS {
            return Err(WINDOW - elapsed);
        }
        e.1 += 1;
        Ok(())
    }

    /// An attempt from `ip` whose token was accepted: it does not count.
    pub fn accepted(&self, ip: IpAddr) {
        let mut map = self.attempts.lock().expect("the sign-in limiter's lock");
        if let Some(e) = map.get_mut(&key(ip)) {
            e.1 = e.1.saturating_sub(1);
        }
    }
}

/// The client's address as the API's rule tells it (`domain::ip::client_ip`): the TCP
/// peer, or what a trusted proxy's header says; `None` when the server records no peer,
/// or a trusted proxy's header is missing or unreadable.
pub fn told(
    c: &crate::Console,
    extensions: &axum::http::Extensions,
    headers: &axum::http::HeaderMap,
) -> Option<IpAddr> {
    let peer = extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()?.0.ip();
    let lines: Vec<&[u8]> = headers.get_all(c.client_ip_header.as_str()).iter().map(|v| v.as_bytes()).collect();
    domain::ip::client_ip(peer, &lines, &c.trusted_proxies)
}

/// The client's address for counting sign-in attempts: as [`told`], or else the TCP peer;
/// `None` when the server records no peer.
pub struct ClientIp(pub Option<IpAddr>);

impl axum::extract::FromRequestParts<crate::Console> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        c: &crate::Console,
    ) -> Result<Self, Self::Rejection> {
        let peer = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|p| p.0.ip());
        Ok(ClientIp(told(c, &parts.extensions, &parts.headers).or(peer)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_failures_a_minute_hold_an_address_until_the_minute_ends() {
        let l = SignIns::default();
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let t0 = Instant::now();
        for i in 0..MAX_ATTEMPTS {
            assert_eq!(l.attempt(a, t0 + Duration::from_secs(u64::from(i))), Ok(()), "attempt {i} may go");
        }
        assert_eq!(l.attempt(a, t0 + Duration::from_secs(20)), Err(Duration::from_secs(40)));
        assert_eq!(l.attempt(b, t0), Ok(()), "another address is not held");
        assert_eq!(l.attempt(a, t0 + WINDOW), Ok(()), "the window ended: a new one counts from one");
    }

    #[test]
    fn a_success_forgives_only_itself() {
        let l = SignIns::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..9 {
            l.attempt(a, t0).unwrap();
        }
        // A good token between guesses does not reset the count.
        l.attempt(a, t0).unwrap();
        l.accepted(a);
        l.attempt(a, t0).unwrap();
        assert!(l.attempt(a, t0).is_err(), "ten failures, whatever succeeded between them");
    }

    #[test]
    fn an_ipv6_client_counts_by_its_64() {
        let l = SignIns::default();
        let t0 = Instant::now();
        for i in 0..MAX_ATTEMPTS {
            l.attempt(format!("2001:db8:1:2::{i:x}").parse().unwrap(), t0).unwrap();
        }
        assert!(l.attempt("2001:db8:1:2:ffff::1".parse().unwrap(), t0).is_err(), "the same /64");
        assert!(l.attempt("2001:db8:1:3::1".parse().unwrap(), t0).is_ok(), "another /64");
    }

    #[test]
    fn the_addresses_remembered_are_bounded() {
        let l = SignIns::default();
        let t0 = Instant::now();
        for i in 0..(MAX_ADDRESSES as u32 + 5) {
            l.attempt(IpAddr::from(i.to_be_bytes()), t0 + Duration::from_millis(u64::from(i))).unwrap();
        }
        assert_eq!(l.attempts.lock().unwrap().len(), MAX_ADDRESSES);
    }
}
