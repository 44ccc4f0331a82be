//! An instance's queue as people read it (`GET {inst}/queue`): its counts and rate, the
//! pacing in force, and a page of its messages, the unfinished in queue order with the
//! earliest time each can go, or the failed with their reasons.
//!
//! The times are a projection of the worker's pacer (docs/sending.md) from the sends
//! Postgres recorded: the interval after the last send, the per-minute cap over the last
//! minute, and the send window. The pacer's random jitter and a reconnect's grace and
//! ramp-up can only make a send later, so each time is the earliest it can go.

use std::collections::VecDeque;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::db::instances::InstanceState;
use shared::db::messages::{listing, MessageOut, MessageRow, MessageStatus};
use shared::ids::MessageId;
use shared::window::SendWindow;
use utoipa::{IntoParams, ToSchema};

use crate::instances::{EffectivePacingOut, InstanceOut};
use crate::{Ctx, Error, Result};

/// How deep into the queue a page's times are projected: past it, `due_at` is absent.
pub const PROJECTED: i64 = 100_000;

/// Which messages a page lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueList {
    /// Queued and in flight, in the order they go.
    #[default]
    Pending,
    /// Failed, the latest failure first.
    Failed,
}

/// A page of the queue.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct QueueQuery {
    /// `pending` (default) or `failed`.
    pub list: Option<QueueList>,
    /// Page size, 1-200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page (of the same list).
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
}

/// The queue in figures.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QueueCountsOut {
    pub queued: i64,
    pub in_flight: i64,
    /// Failed within the last 24 hours.
    pub failed_last_day: i64,
    /// Sent within the last minute: the current rate.
    pub sent_last_minute: i64,
    pub sent_last_hour: i64,
}

/// Why nothing leaves the queue now, when nothing does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueHold {
    /// The instance is not connected: its messages wait (until they expire).
    NotConnected,
    /// A policy paused the queue (`queue_paused` on the instance says which); `POST
    /// {inst}/queue/resume` lifts it.
    Paused,
}

/// A message in the queue.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QueueItemOut {
    #[serde(flatten)]
    pub message: MessageOut,
    /// Attempts started so far.
    pub attempts: i32,
    /// The earliest time it can go (a pending message), from the pacing in force; absent
    /// while the queue is held, or past the first 100,000 of the queue.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub due_at: Option<DateTime<Utc>>,
}

/// The queue: counts, the pacing it runs at, and a page of messages.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QueueOut {
    pub list: QueueList,
    pub counts: QueueCountsOut,
    pub effective_pacing: EffectivePacingOut,
    /// Set while nothing leaves the queue.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub held: Option<QueueHold>,
    pub data: Vec<QueueItemOut>,
    pub next_cursor: Option<String>,
}

/// The earliest times of the next `n` sends, at `interval` apart and at most `cap` in
/// any 60 s, from `now`, after the sends at `recent` (oldest first), inside `window`.
pub fn project(
    now: DateTime<Utc>,
    recent: &[DateTime<Utc>],
    interval: Duration,
    cap: u32,
    window: Option<&SendWindow>,
    n: usize,
) -> Vec<DateTime<Utc>> {
    let minute = chrono::Duration::seconds(60);
    let interval = chrono::Duration::from_std(interval).unwrap_or(minute);
    let cap = cap.max(1) as usize;
    let mut sent: VecDeque<DateTime<Utc>> = recent.iter().copied().collect();
    let mut last = recent.last().copied();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut at = now;
        if let Some(l) = last {
            at = at.max(l + interval);
        }
        while sent.front().is_some_and(|t| at - *t >= minute) {
            sent.pop_front();
        }
        if sent.len() >= cap {
            at = at.max(sent[sent.len() - cap] + minute);
        }
        if let Some(w) = window {
            at += chrono::Duration::from_std(w.wait(at)).unwrap_or_default();
        }
        out.push(at);
        sent.push_back(at);
        while sent.len() > cap {
            sent.pop_front();
        }
        last = Some(at);
    }
    out
}

/// The queue of the instance, a page of the list `q` asks.
pub async fn get(ctx: Ctx<'_>, q: &QueueQuery) -> Result<QueueOut> {
    let limit = crate::page::limit(q.limit, 50, 200)?;
    let list = q.list.unwrap_or_default();
    let db = &ctx.core.db;
    let row = shared::db::instances::get(db, ctx.instance).await?.ok_or(Error::InstanceNotFound)?;
    let window = SendWindow::of(row.send_window_start, row.send_window_end, &row.time_zone);
    let connected = row.state == InstanceState::Connected;
    let out = InstanceOut::from(row);
    let pacing = EffectivePacingOut::of(&out, &ctx.core.config.risk_policy());
    let held = match (out.queue_paused.is_some(), connected) {
        (true, _) => Some(QueueHold::Paused),
        (false, false) => Some(QueueHold::NotConnected),
        (false, true) => None,
    };
    let c = listing::counts(db, ctx.instance).await?;
    let counts = QueueCountsOut {
        queued: c.queued,
        in_flight: c.in_flight,
        failed_last_day: c.failed_24h,
        sent_last_minute: c.sent_1m,
        sent_last_hour: c.sent_1h,
    };
    let tag = ["q1", ctx.instance.as_str(), list_tag(list)];
    let (rows, next_cursor) = match list {
        QueueList::Pending => {
            let after = match &q.cursor {
                Some(c) => Some(crate::page::decode(c, &tag, 4)?[3].parse::<i64>().map_err(|_| bad_cursor())?),
                None => None,
            };
            let rows = listing::pending(db, ctx.instance, after, i64::from(limit) + 1).await?;
            crate::page::page(rows, limit, |r| crate::page::encode(&[&tag[..], &[r.seq.to_string().as_str()]].concat()))
        }
        QueueList::Failed => {
            let after = match &q.cursor {
                Some(c) => {
                    let f = crate::page::decode(c, &tag, 5)?;
                    let at = crate::page::parse_time_field(&f[3])?;
                    Some((at, MessageId::parse(&f[4]).map_err(|_| bad_cursor())?))
                }
                None => None,
            };
            let rows = listing::failed(db, ctx.instance, after, i64::from(limit) + 1).await?;
            crate::page::page(rows, limit, |r| {
                let at = crate::page::time_field(r.updated_at);
                crate::page::encode(&[&tag[..], &[at.as_str(), r.id.as_str()]].concat())
            })
        }
    };
    let due = match (list, held) {
        (QueueList::Pending, None) => due_times(ctx, &rows, &pacing, window.as_ref()).await?,
        _ => vec![None; rows.len()],
    };
    let data = rows
        .iter()
        .zip(due)
        .map(|(r, due_at)| QueueItemOut { message: r.view(), attempts: r.attempts, due_at })
        .collect();
    Ok(QueueOut { list, counts, effective_pacing: pacing, held, data, next_cursor })
}

fn list_tag(l: QueueList) -> &'static str {
    match l {
        QueueList::Pending => "pending",
        QueueList::Failed => "failed",
    }
}

fn bad_cursor() -> Error {
    Error::invalid("invalid cursor")
}

/// The earliest time of each of `rows` (a page of pending messages, in queue order): one
/// in flight goes now; the queued after it at the pacing in force.
async fn due_times(
    ctx: Ctx<'_>,
    rows: &[MessageRow],
    pacing: &EffectivePacingOut,
    window: Option<&SendWindow>,
) -> Result<Vec<Option<DateTime<Utc>>>> {
    let Some(first) = rows.first() else { return Ok(Vec::new()) };
    // Where the page starts in the queue: the messages ahead of it go first.
    let ahead = listing::pending_through(&ctx.core.db, ctx.instance, first.seq).await? - 1;
    if ahead >= PROJECTED {
        return Ok(vec![None; rows.len()]);
    }
    let recent = listing::recent_sends(&ctx.core.db, ctx.instance).await?;
    let now = Utc::now();
    let n = (ahead.max(0) as usize + rows.len()).min(PROJECTED as usize);
    let interval = Duration::from_millis(u64::from(pacing.min_interval_ms));
    let times = project(now, &recent, interval, pacing.max_per_minute, window, n);
    Ok(rows
        .iter()
        .enumerate()
        .map(|(i, r)| match r.status {
            MessageStatus::InFlight => Some(now),
            _ => times.get(ahead.max(0) as usize + i).copied(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 26, 12, 0, 0).unwrap() + chrono::Duration::seconds(s)
    }

    #[test]
    fn the_interval_runs_from_the_last_send() {
        let got = project(t(0), &[t(-1)], Duration::from_secs(2), 60, None, 3);
        assert_eq!(got, vec![t(1), t(3), t(5)]);
        let idle = project(t(0), &[t(-100)], Duration::from_secs(2), 60, None, 2);
        assert_eq!(idle, vec![t(0), t(2)], "a send long ago holds nothing");
    }

    #[test]
    fn the_per_minute_cap_waits_for_the_oldest_send_of_the_minute() {
        // 3 a minute at 1 s: three go, the fourth a minute after the first.
        let got = project(t(0), &[], Duration::from_secs(1), 3, None, 5);
        assert_eq!(got, vec![t(0), t(1), t(2), t(60), t(61)]);
        // Two sends of the last minute count against the cap.
        let got = project(t(0), &[t(-50), t(-40)], Duration::from_secs(1), 3, None, 3);
        assert_eq!(got, vec![t(0), t(10), t(20)]);
    }

    #[test]
    fn nothing_is_due_outside_the_send_window() {
        use chrono::NaiveTime;
        let w = SendWindow::of(NaiveTime::from_hms_opt(13, 0, 0), NaiveTime::from_hms_opt(14, 0, 0), "UTC").unwrap();
        let got = project(t(0), &[], Duration::from_secs(2), 60, Some(&w), 2);
        assert_eq!(got, vec![t(3600), t(3602)], "the window opens at 13:00");
    }
}
