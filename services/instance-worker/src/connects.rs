//! Paced connects: a worker opens at most `worker.connects_per_second` sessions a
//! second, whatever asks (a fresh worker claiming thousands of instances after a restart,
//! every session of the worker reconnecting after the network dropped them). The network,
//! Postgres (each connect writes its state and events) and Redis then see a steady rate
//! instead of a spike, and the sessions come back in `n / rate` seconds.
//!
//! Slots are `1 / rate` apart and handed out in the order asked; each connect starts at a
//! random point inside its own slot (the jitter), so connects do not fall in lockstep and
//! the rate holds exactly. Time is tokio's, so tests run it on a paused clock.

use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::metrics::CONNECTS_WAITING;

pub struct Connects {
    gap: Duration,
    /// Where the next slot starts (never before now).
    next: Mutex<Option<Instant>>,
}

impl Connects {
    pub fn new(per_second: u32) -> Connects {
        Connects { gap: Duration::from_secs(1) / per_second.max(1), next: Mutex::new(None) }
    }

    /// When the caller's connect may start: the next free slot, at a random point in it.
    /// Taking a slot reserves it, so a caller that gives up leaves a gap (never a burst).
    pub fn reserve(&self) -> Instant {
        let now = Instant::now();
        let slot = {
            let mut next = self.next.lock().expect("connects lock");
            let slot = next.filter(|n| *n > now).unwrap_or(now);
            *next = Some(slot + self.gap);
            slot
        };
        slot + self.gap.mul_f64(rand::thread_rng().gen_range(0.0..1.0))
    }

    /// Waits for the caller's slot ([`Connects::reserve`]), counted as waiting meanwhile.
    pub async fn wait(&self) {
        let at = self.reserve();
        if at <= Instant::now() {
            return;
        }
        let _waiting = Waiting::start();
        tokio::time::sleep_until(at).await;
    }
}

/// One connect waiting for its slot, in `paceline_worker_connects_waiting` while it lives
/// (also when the wait is dropped: the actor was stopped meanwhile).
struct Waiting;

impl Waiting {
    fn start() -> Waiting {
        metrics::gauge!(CONNECTS_WAITING).increment(1.0);
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        metrics::gauge!(CONNECTS_WAITING).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_connects_keeps_the_rate_with_each_inside_its_own_slot() {
        let c = Connects::new(100);
        let t0 = Instant::now();
        let gap = Duration::from_millis(10);
        let mut ats: Vec<Instant> = (0..1_000).map(|_| c.reserve()).collect();
        for (k, at) in ats.iter().enumerate() {
            let slot = t0 + gap * k as u32;
            assert!(*at >= slot && *at < slot + gap, "connect {k} outside its slot");
        }
        // Jittered: not every connect starts at its slot's beginning.
        assert!(ats.iter().enumerate().filter(|(k, at)| **at != t0 + gap * *k as u32).count() > 900);
        // Whatever the jitter, no second holds more than the rate.
        ats.sort();
        for w in ats.windows(101) {
            assert!(w[100] - w[0] >= Duration::from_secs(1) - gap, "101 connects within a second");
        }
        // A thousand connects at 100 a second take ten seconds.
        assert!(*ats.last().unwrap() - t0 >= Duration::from_millis(9_990));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_worker_connects_at_once_and_waiters_start_in_order() {
        let c = std::sync::Arc::new(Connects::new(10));
        // Nothing asked for a while: the first connect is within its own slot of now.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let t0 = Instant::now();
        c.wait().await;
        assert!(Instant::now() - t0 < Duration::from_millis(100));
        // Ten waiters at once at 10 a second: the last starts about a second later, and
        // each starts in the order it asked.
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for k in 0..10 {
            let (c, order) = (c.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                c.wait().await;
                order.lock().unwrap().push((k, Instant::now()));
            }));
            tokio::task::yield_now().await;
        }
        for t in tasks {
            t.await.unwrap();
        }
        let order = order.lock().unwrap();
        assert_eq!(order.iter().map(|(k, _)| *k).collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
        let last = order.last().unwrap().1 - t0;
        assert!(last >= Duration::from_millis(1_000) && last < Duration::from_millis(1_200), "{last:?}");
    }
}
