//! One delivery attempt: the request, and what its answer means for the delivery.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::Rng;
use shared::db::deliveries::DeliveryState;

/// How the endpoint answered, as the retry rules see it.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// 2xx.
    Accepted(u16),
    /// 410: the endpoint is gone; it gets disabled.
    Gone,
    /// Any other status, with its `Retry-After` if it sent one.
    Refused { status: u16, retry_after: Option<Duration> },
    /// No answer: could not connect, timed out, refused address.
    NoAnswer(String),
}

impl Answer {
    pub fn of(status: u16, retry_after: Option<&str>, now: DateTime<Utc>) -> Answer {
        match status {
            200..=299 => Answer::Accepted(status),
            410 => Answer::Gone,
            _ => Answer::Refused { status, retry_after: retry_after.and_then(|v| parse_retry_after(v, now)) },
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            Answer::Accepted(s) | Answer::Refused { status: s, .. } => Some(*s),
            Answer::Gone => Some(410),
            Answer::NoAnswer(_) => None,
        }
    }

    /// The metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Answer::Accepted(_) => "succeeded",
            Answer::Gone => "gone",
            Answer::Refused { .. } => "refused",
            Answer::NoAnswer(_) => "no_answer",
        }
    }
}

/// `Retry-After` as seconds or an HTTP date.
pub fn parse_retry_after(v: &str, now: DateTime<Utc>) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = DateTime::parse_from_rfc2822(v).ok()?.with_timezone(&Utc);
    Some((at - now).to_std().unwrap_or(Duration::ZERO))
}

/// The retry rules of the deployment.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub base: Duration,
    pub max: Duration,
}

impl RetryPolicy {
    /// The wait after the `attempts`-th failed attempt: base·2^(attempts-1), capped, less
    /// up to a fifth at random (so retries of many deliveries spread out); a `Retry-After`
    /// replaces it, within the cap.
    pub fn wait(&self, attempts: i32, retry_after: Option<Duration>, rng: &mut impl Rng) -> Duration {
        if let Some(ra) = retry_after {
            return ra.min(self.max);
        }
        let exp = (attempts.max(1) - 1).min(30) as u32;
        let full = shared::backoff::doubling(self.base, exp, self.max);
        full.mul_f64(1.0 - rng.gen_range(0.0..0.2))
    }
}

/// What the delivery becomes after an attempt: (state, next attempt).
pub fn next_state(
    answer: &Answer,
    attempts: i32,
    retry_until: DateTime<Utc>,
    policy: &RetryPolicy,
    now: DateTime<Utc>,
    rng: &mut impl Rng,
) -> (DeliveryState, Option<DateTime<Utc>>) {
    let retry_after = match answer {
        Answer::Accepted(_) => return (DeliveryState::Succeeded, None),
        Answer::Gone => return (DeliveryState::Failed, None),
        Answer::Refused { retry_after, .. } => *retry_after,
        Answer::NoAnswer(_) => None,
    };
    let wait = policy.wait(attempts, retry_after, rng);
    let at = now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
    if at > retry_until {
        (DeliveryState::Failed, None)
    } else {
        (DeliveryState::Pending, Some(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn policy() -> RetryPolicy {
        RetryPolicy { base: Duration::from_secs(5), max: Duration::from_secs(3600) }
    }

    #[test]
    fn waits_double_with_jitter_up_to_the_cap() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let p = policy();
        for (attempts, full) in [(1, 5u64), (2, 10), (3, 20), (4, 40), (12, 3600), (200, 3600)] {
            let w = p.wait(attempts, None, &mut rng);
            assert!(w <= Duration::from_secs(full) && w >= Duration::from_secs(full).mul_f64(0.8), "{attempts}: {w:?}");
        }
    }

    #[test]
    fn retry_after_is_honoured_within_the_cap() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let p = policy();
        assert_eq!(p.wait(1, Some(Duration::from_secs(120)), &mut rng), Duration::from_secs(120));
        assert_eq!(p.wait(1, Some(Duration::from_secs(86_400)), &mut rng), Duration::from_secs(3600));
        let now = "2026-11-22T10:00:00Z".parse().unwrap();
        assert_eq!(parse_retry_after("30", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Sun, 22 Nov 2026 10:01:00 GMT", now), Some(Duration::from_secs(60)));
        assert_eq!(parse_retry_after("Sun, 22 Nov 2026 09:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(
            Answer::of(503, Some("7"), now),
            Answer::Refused { status: 503, retry_after: Some(Duration::from_secs(7)) }
        );
    }

    #[test]
    fn outcomes_of_answers() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let now: DateTime<Utc> = "2026-11-22T10:00:00Z".parse().unwrap();
        let until = now + chrono::Duration::minutes(1);
        let p = policy();
        assert_eq!(next_state(&Answer::Accepted(204), 1, until, &p, now, &mut rng), (DeliveryState::Succeeded, None));
        assert_eq!(next_state(&Answer::Gone, 1, until, &p, now, &mut rng), (DeliveryState::Failed, None));
        let (state, at) = next_state(&Answer::NoAnswer("timed out".into()), 1, until, &p, now, &mut rng);
        assert_eq!(state, DeliveryState::Pending);
        assert!(at.unwrap() > now && at.unwrap() <= now + chrono::Duration::seconds(5));
        // Past the retry span: failed for good.
        let refused = Answer::Refused { status: 500, retry_after: Some(Duration::from_secs(120)) };
        assert_eq!(next_state(&refused, 3, until, &p, now, &mut rng), (DeliveryState::Failed, None));
    }
}
