//! The one exponential backoff: a base wait doubling per failure, at a cap. Every retry
//! loop (webhook attempts, the dispatcher's and the attendant's consumers, the attendant's
//! provider calls, the queue's retries and rate-limit waits, media downloads) takes its
//! wait from here; jitter, where a loop wants it, is the caller's.

use std::time::Duration;

/// `base` doubled `doublings` times, at most `cap`; never overflows, whatever the count.
pub fn doubling(base: Duration, doublings: u32, cap: Duration) -> Duration {
    base.saturating_mul(2u32.saturating_pow(doublings)).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_without_overflow() {
        let (base, cap) = (Duration::from_millis(200), Duration::from_millis(6_400));
        let waits: Vec<u64> = (0..8).map(|n| doubling(base, n, cap).as_millis() as u64).collect();
        assert_eq!(waits, [200, 400, 800, 1_600, 3_200, 6_400, 6_400, 6_400]);
        assert_eq!(doubling(Duration::from_secs(30), u32::MAX, Duration::from_secs(3600)), Duration::from_secs(3600));
        assert_eq!(doubling(Duration::MAX, 40, Duration::MAX), Duration::MAX);
        assert_eq!(doubling(Duration::ZERO, 5, cap), Duration::ZERO);
    }
}
