//! Failed sign-ins per client address: after [`MAX_FAILURES`] within [`WINDOW`], an
//! address may not try again until the window ends (429 with `Retry-After`); a success
//! forgets its failures. Per console process, and at most [`MAX_ADDRESSES`] addresses are
//! remembered. Behind a proxy every user shares the proxy's address: then it is a limit on
//! all sign-ins, which still stops guessing.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const MAX_FAILURES: u32 = 10;
pub const WINDOW: Duration = Duration::from_secs(60);
pub const MAX_ADDRESSES: usize = 10_000;

#[derive(Default)]
pub struct SignIns {
    failures: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl SignIns {
    /// How long `ip` must wait before trying again, if it must.
    pub fn wait(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let map = self.failures.lock().expect("the sign-in limiter's lock");
        let (since, n) = map.get(&ip)?;
        let left = WINDOW.checked_sub(now.saturating_duration_since(*since))?;
        (*n >= MAX_FAILURES && !left.is_zero()).then_some(left)
    }

    /// A failed sign-in from `ip`.
    pub fn failed(&self, ip: IpAddr, now: Instant) {
        let mut map = self.failures.lock().expect("the sign-in limiter's lock");
        if map.len() >= MAX_ADDRESSES && !map.contains_key(&ip) {
            map.retain(|_, (since, _)| now.saturating_duration_since(*since) < WINDOW);
            if map.len() >= MAX_ADDRESSES {
                // Full of fresh failures: the oldest window goes.
                if let Some(oldest) = map.iter().min_by_key(|(_, (since, _))| *since).map(|(k, _)| *k) {
                    map.remove(&oldest);
                }
            }
        }
        let e = map.entry(ip).or_insert((now, 0));
        if now.saturating_duration_since(e.0) >= WINDOW {
            *e = (now, 0);
        }
        e.1 += 1;
    }

    /// A successful sign-in from `ip`.
    pub fn succeeded(&self, ip: IpAddr) {
        self.failures.lock().expect("the sign-in limiter's lock").remove(&ip);
    }
}

/// The address a request came from (the TCP peer), when the server records it.
pub struct ClientIp(pub Option<IpAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        let peer = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>();
        Ok(ClientIp(peer.map(|c| c.0.ip())))
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
        for i in 0..MAX_FAILURES {
            assert_eq!(l.wait(a, t0), None, "attempt {i} may go");
            l.failed(a, t0 + Duration::from_secs(u64::from(i)));
        }
        assert_eq!(l.wait(a, t0 + Duration::from_secs(20)), Some(Duration::from_secs(40)));
        assert_eq!(l.wait(b, t0), None, "another address is not held");
        assert_eq!(l.wait(a, t0 + WINDOW), None, "the window ended");
        l.failed(a, t0 + WINDOW);
        assert_eq!(l.wait(a, t0 + WINDOW), None, "a new window counts from one");
        l.succeeded(a);
        assert!(l.failures.lock().unwrap().is_empty());
    }

    #[test]
    fn the_addresses_remembered_are_bounded() {
        let l = SignIns::default();
        let t0 = Instant::now();
        for i in 0..(MAX_ADDRESSES as u32 + 5) {
            l.failed(IpAddr::from(i.to_be_bytes()), t0 + Duration::from_millis(u64::from(i)));
        }
        assert_eq!(l.failures.lock().unwrap().len(), MAX_ADDRESSES);
    }
}
