//! The pacer: when an instance's next message may go. Rules, all per instance:
//!
//! 1. **Grace.** After each (re)connect, nothing is sent for a random time drawn from
//!    [`pacing.grace_min_ms`, `pacing.grace_max_ms`] (default 15-30 s).
//! 2. **Ramp-up.** After the grace the rate rises linearly from `pacing.ramp_start`
//!    (default 0.25) of the full rate to the full rate over `pacing.ramp_ms` (default
//!    10 min): at fraction `f` the interval is `min_interval_ms / f` and the per-minute
//!    cap `max(1, floor(max_per_minute * f))`.
//! 3. **Interval.** Consecutive sends are at least the (ramped) interval apart, plus a
//!    random jitter of 0..`pacing.jitter` (default 25%) of it; jitter only lengthens.
//! 4. **Per minute.** At most the (ramped) cap of sends in any sliding 60 s.
//! 5. **Send window.** With a window set (local `start`..`end` in the instance's time zone;
//!    `end` before `start` spans midnight), nothing is sent outside it.
//!
//! The pacer only computes instants; the queue sleeps until them, so it never refuses a
//! message (no 429) and never reorders.

use std::collections::VecDeque;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::Rng;
use tokio::time::Instant;

const MINUTE: Duration = Duration::from_secs(60);

pub use shared::window::SendWindow;

/// An instance's pacing rules.
#[derive(Debug, Clone)]
pub struct Rules {
    pub min_interval: Duration,
    pub max_per_minute: u32,
    pub jitter: f64,
    pub grace_min: Duration,
    pub grace_max: Duration,
    pub ramp: Duration,
    pub ramp_start: f64,
    pub window: Option<SendWindow>,
}

/// One instance's pacing state.
#[derive(Debug)]
pub struct Pacer {
    rules: Rules,
    connected_at: Option<Instant>,
    grace: Duration,
    last_send: Option<Instant>,
    recent: VecDeque<Instant>,
    jitter: Duration,
}

impl Pacer {
    pub fn new(rules: Rules) -> Pacer {
        Pacer {
            rules,
            connected_at: None,
            grace: Duration::ZERO,
            last_send: None,
            recent: VecDeque::new(),
            jitter: Duration::ZERO,
        }
    }

    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    pub fn set_rules(&mut self, rules: Rules) {
        self.rules = rules;
    }

    /// A (re)connect: a new grace period starts.
    pub fn connected(&mut self, now: Instant, rng: &mut impl Rng) {
        let (lo, hi) = (self.rules.grace_min, self.rules.grace_max.max(self.rules.grace_min));
        self.grace = if hi > lo { rng.gen_range(lo..=hi) } else { lo };
        self.connected_at = Some(now);
    }

    pub fn disconnected(&mut self) {
        self.connected_at = None;
    }

    /// The fraction of the full rate at `now` (ramp-up), in (0, 1].
    pub fn rate_fraction(&self, now: Instant) -> f64 {
        let Some(at) = self.connected_at else { return self.rules.ramp_start };
        let since = now.saturating_duration_since(at + self.grace);
        if self.rules.ramp.is_zero() {
            return 1.0;
        }
        let p = (since.as_secs_f64() / self.rules.ramp.as_secs_f64()).min(1.0);
        self.rules.ramp_start + (1.0 - self.rules.ramp_start) * p
    }

    /// The earliest instant the next message may go, or `None` while disconnected.
    pub fn next_at(&mut self, now: Instant, wall: DateTime<Utc>) -> Option<Instant> {
        let connected_at = self.connected_at?;
        while self.recent.front().is_some_and(|t| now.saturating_duration_since(*t) >= MINUTE) {
            self.recent.pop_front();
        }
        let f = self.rate_fraction(now);
        let mut at = connected_at + self.grace;
        if let Some(last) = self.last_send {
            let interval = self.rules.min_interval.div_f64(f);
            at = at.max(last + interval + self.jitter);
        }
        let cap = ((self.rules.max_per_minute as f64 * f).floor() as usize).max(1);
        if self.recent.len() >= cap {
            // The send that must leave the window first.
            at = at.max(self.recent[self.recent.len() - cap] + MINUTE);
        }
        if let Some(w) = &self.rules.window {
            // Judge the window at the moment the other rules allow, and not before now:
            // a time the other rules allowed long ago must not move the opening earlier.
            at = at.max(now);
            let ahead = at.saturating_duration_since(now);
            let wall_at = wall + chrono::Duration::from_std(ahead).unwrap_or_default();
            at += w.wait(wall_at);
        }
        Some(at)
    }

    /// A message went out at `at`.
    pub fn sent(&mut self, at: Instant, rng: &mut impl Rng) {
        self.last_send = Some(at);
        self.recent.push_back(at);
        let j = self.rules.jitter.clamp(0.0, 1.0);
        self.jitter = if j > 0.0 { self.rules.min_interval.mul_f64(rng.gen_range(0.0..=j)) } else { Duration::ZERO };
    }
}

#[cfg(test)]
mod tests;
