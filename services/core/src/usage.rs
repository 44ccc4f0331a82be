//! What an instance used, per UTC day and in total, from Postgres (`db::usage`).
//! Messages, media and deliveries are rolled up by the dispatchers every
//! `usage.rollup_interval_ms` (10 s by default); lookups count as they happen; API
//! requests reach Postgres within a second.

use chrono::{Duration, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use shared::db::usage::{self, Counts};
use utoipa::{IntoParams, ToSchema};

use crate::{Ctx, Error, Result};

/// The longest span asked at once (days, both ends included).
const MAX_DAYS: i64 = 93;
/// The span when none is asked.
const DEFAULT_DAYS: i64 = 30;

/// The days asked (UTC).
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    /// First day, `YYYY-MM-DD` (default: 29 days before `to`).
    #[param(value_type = Option<String>, format = Date)]
    pub from: Option<NaiveDate>,
    /// Last day, `YYYY-MM-DD` (default: today); at most 93 days after `from`.
    #[param(value_type = Option<String>, format = Date)]
    pub to: Option<NaiveDate>,
}

/// One day's usage.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UsageDay {
    #[schema(value_type = String, format = Date)]
    pub date: NaiveDate,
    #[serde(flatten)]
    pub counts: Counts,
}

/// Usage per day (every day of the span, oldest first) and in total.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UsageOut {
    #[schema(value_type = String, format = Date)]
    pub from: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub to: NaiveDate,
    pub days: Vec<UsageDay>,
    pub totals: Counts,
}

/// The span `q` asks, checked: both ends within a hundred years of `today`, `from` not
/// after `to`, at most 93 days.
pub fn span(q: &UsageQuery, today: NaiveDate) -> Result<(NaiveDate, NaiveDate)> {
    // Dates far from now are refused before any arithmetic on them.
    let sane = |d: NaiveDate| (today - Duration::days(365 * 100)..=today + Duration::days(365 * 100)).contains(&d);
    if !q.from.is_none_or(sane) || !q.to.is_none_or(sane) {
        return Err(Error::invalid("from and to must be within a hundred years of today"));
    }
    let to = q.to.unwrap_or(today);
    let from = q.from.unwrap_or(to - Duration::days(DEFAULT_DAYS - 1));
    if from > to {
        return Err(Error::invalid("from must not be after to"));
    }
    if (to - from).num_days() + 1 > MAX_DAYS {
        return Err(Error::invalid(format!("at most {MAX_DAYS} days at once")));
    }
    Ok((from, to))
}

/// The instance's usage per UTC day of the span `q` asks, and in total.
pub async fn get(ctx: Ctx<'_>, q: &UsageQuery) -> Result<UsageOut> {
    let (from, to) = span(q, Utc::now().date_naive())?;
    let rows = usage::days(&ctx.core.db, ctx.instance, from, to).await?;
    Ok(every_day(from, to, &rows))
}

/// Every day of `from..=to` (those without a row count nothing), and the totals.
pub fn every_day(from: NaiveDate, to: NaiveDate, rows: &[usage::DayRow]) -> UsageOut {
    let mut totals = Counts::default();
    let mut days = Vec::new();
    let mut day = from;
    while day <= to {
        let counts = rows.iter().find(|r| r.day == day).map(|r| r.counts.clone()).unwrap_or_default();
        totals.add(&counts);
        days.push(UsageDay { date: day, counts });
        day += Duration::days(1);
    }
    UsageOut { from, to, days, totals }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_default_to_thirty_days_and_are_bounded() {
        let today = NaiveDate::from_ymd_opt(2026, 11, 26).unwrap();
        let d = |s: &str| Some(s.parse::<NaiveDate>().unwrap());
        assert_eq!(span(&UsageQuery::default(), today).unwrap(), (d("2026-10-28").unwrap(), today));
        assert_eq!(span(&UsageQuery { from: d("2026-11-01"), to: None }, today).unwrap().0, d("2026-11-01").unwrap());
        assert!(span(&UsageQuery { from: d("2026-11-02"), to: d("2026-11-01") }, today).is_err(), "from after to");
        assert!(span(&UsageQuery { from: d("2026-01-01"), to: d("2026-04-03") }, today).is_ok(), "93 days");
        assert!(span(&UsageQuery { from: d("2026-01-01"), to: d("2026-04-04") }, today).is_err(), "94 days");
        assert!(span(&UsageQuery { from: d("1900-01-01"), to: None }, today).is_err(), "a century ago");
    }
}
