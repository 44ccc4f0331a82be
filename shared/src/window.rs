//! A daily send window in an instance's time zone: the pacer waits for it to open, and
//! the attendant does not answer outside it.

use std::time::Duration;

use chrono::{DateTime, NaiveTime, TimeZone, Utc};

/// A daily window in a time zone.
#[derive(Debug, Clone, PartialEq)]
pub struct SendWindow {
    pub start: NaiveTime,
    pub end: NaiveTime,
    pub tz: chrono_tz::Tz,
}

impl SendWindow {
    /// An instance's window, when it has one and its zone is known.
    pub fn of(start: Option<NaiveTime>, end: Option<NaiveTime>, tz: &str) -> Option<SendWindow> {
        Some(SendWindow { start: start?, end: end?, tz: tz.parse().ok()? })
    }

    /// Whether the window is open at `wall`.
    pub fn is_open(&self, wall: DateTime<Utc>) -> bool {
        self.wait(wall).is_zero()
    }

    /// How long from `wall` until the window is open (zero when it is).
    pub fn wait(&self, wall: DateTime<Utc>) -> Duration {
        let local = wall.with_timezone(&self.tz);
        let t = local.time();
        let open =
            if self.start <= self.end { t >= self.start && t < self.end } else { t >= self.start || t < self.end };
        if open || self.start == self.end {
            return Duration::ZERO;
        }
        // The next local `start`: today if still ahead, else tomorrow.
        let mut day = local.date_naive();
        if t >= self.start {
            day = day.succ_opt().unwrap_or(day);
        }
        let next = self
            .tz
            .from_local_datetime(&day.and_time(self.start))
            .earliest()
            // A start inside a DST gap: an hour later exists.
            .or_else(|| {
                self.tz.from_local_datetime(&(day.and_time(self.start) + chrono::Duration::hours(1))).earliest()
            });
        match next {
            Some(n) => (n.with_timezone(&Utc) - wall).to_std().unwrap_or(Duration::ZERO),
            None => Duration::from_secs(60),
        }
    }
}
