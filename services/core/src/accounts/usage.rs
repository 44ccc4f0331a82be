//! What an account used: per UTC day and in total (its instances' figures from the day
//! each joined it, and what it kept of instances that left), and the billing export,
//! a line per instance and day, paged, as JSON or CSV.

use chrono::{Duration, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use shared::db::accounts;
use shared::db::usage::Counts;
use shared::ids::AccountId;
use utoipa::{IntoParams, ToSchema};

use crate::page;
use crate::usage::{UsageOut, UsageQuery};
use crate::{Core, Error, Result};

/// The longest span one export covers (days, both ends included).
const EXPORT_MAX_DAYS: i64 = 366;

/// The account's usage per UTC day of the span `q` asks, and in total.
pub async fn get(core: &Core, id: &AccountId, q: &UsageQuery) -> Result<UsageOut> {
    let (from, to) = crate::usage::span(q, Utc::now().date_naive())?;
    if accounts::get(&core.db, id).await?.is_none() {
        return Err(Error::NotFound("account"));
    }
    let rows = accounts::usage_days(&core.db, id, from, to).await?;
    Ok(crate::usage::every_day(from, to, &rows))
}

/// The format of an export.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    #[default]
    Json,
    Csv,
}

/// Query of `GET /v1/accounts/{id}/usage/export`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExportQuery {
    /// First day, `YYYY-MM-DD`.
    #[param(value_type = String, format = Date)]
    pub from: NaiveDate,
    /// Last day, `YYYY-MM-DD`; at most 366 days after `from`.
    #[param(value_type = String, format = Date)]
    pub to: NaiveDate,
    /// `json` (default) or `csv`.
    pub format: Option<ExportFormat>,
    /// Lines a page, 1-5000 (default 1000).
    #[param(minimum = 1, maximum = 5000)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page (in CSV, the `Link` header's `rel="next"`).
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
}

/// One line of the export: a day of one instance, or (no instance) what the account
/// kept of instances that left it that day.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ExportLine {
    #[schema(value_type = String, format = Date)]
    pub date: NaiveDate,
    /// Absent on the line of usage kept from instances that left the account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_name: Option<String>,
    #[serde(flatten)]
    pub counts: Counts,
}

/// A page of the export.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ExportOut {
    pub account_id: AccountId,
    #[schema(value_type = String, format = Date)]
    pub from: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub to: NaiveDate,
    pub lines: Vec<ExportLine>,
    /// Absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A page of the account's billing export.
pub async fn export(core: &Core, id: &AccountId, q: &ExportQuery) -> Result<ExportOut> {
    let today = Utc::now().date_naive();
    let sane = |d: NaiveDate| (today - Duration::days(365 * 100)..=today + Duration::days(365 * 100)).contains(&d);
    if !sane(q.from) || !sane(q.to) {
        return Err(Error::invalid("from and to must be within a hundred years of today"));
    }
    if q.from > q.to {
        return Err(Error::invalid("from must not be after to"));
    }
    if (q.to - q.from).num_days() + 1 > EXPORT_MAX_DAYS {
        return Err(Error::invalid(format!("at most {EXPORT_MAX_DAYS} days an export")));
    }
    let limit = page::limit(q.limit, 1000, 5000)?;
    let span = format!("{}~{}", q.from, q.to);
    let after = match q.cursor.as_deref() {
        Some(c) => {
            let f = page::decode(c, &["usage", id.as_str(), &span], 5)?;
            let day = f[3].parse::<NaiveDate>().map_err(|_| Error::invalid("invalid cursor"))?;
            Some((day, f[4].clone()))
        }
        None => None,
    };
    if accounts::get(&core.db, id).await?.is_none() {
        return Err(Error::NotFound("account"));
    }
    let rows = accounts::usage_export(&core.db, id, q.from, q.to, after, i64::from(limit) + 1).await?;
    let (rows, next_cursor) = page::page(rows, limit, |r| {
        let day = r.day.to_string();
        page::encode(&["usage", id.as_str(), &span, &day, r.instance_id.as_deref().unwrap_or("")])
    });
    let lines = rows
        .into_iter()
        .map(|r| ExportLine {
            date: r.day,
            instance_id: r.instance_id,
            instance_name: r.instance_name,
            counts: r.counts,
        })
        .collect();
    Ok(ExportOut { account_id: id.clone(), from: q.from, to: q.to, lines, next_cursor })
}

/// The CSV of a page: a header line, then a line each (RFC 4180; names quoted when
/// they need it, and a leading `=+-@` neutralized so a spreadsheet runs no formula).
pub fn csv(out: &ExportOut) -> String {
    let counts = shared::db::usage::COLUMNS.split(", ").collect::<Vec<_>>();
    let mut s = format!("date,instance_id,instance_name,{}\r\n", counts.join(","));
    for l in &out.lines {
        let v = serde_json::to_value(&l.counts).unwrap_or_default();
        let nums: Vec<String> = counts.iter().map(|c| v[*c].as_i64().unwrap_or(0).to_string()).collect();
        s.push_str(&format!(
            "{},{},{},{}\r\n",
            l.date,
            l.instance_id.as_deref().unwrap_or(""),
            field(l.instance_name.as_deref().unwrap_or("")),
            nums.join(",")
        ));
    }
    s
}

/// One CSV field.
fn field(v: &str) -> String {
    let v = if v.starts_with(['=', '+', '-', '@']) { format!("'{v}") } else { v.to_string() };
    if v.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_and_formulas_neutralized() {
        assert_eq!(field("shop-1"), "shop-1");
        assert_eq!(field("-1+1"), "'-1+1");
        assert_eq!(field("@cmd"), "'@cmd");
        assert_eq!(field("=SUM(A1)"), "'=SUM(A1)");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn csv_has_a_header_and_a_line_per_row_in_column_order() {
        let out = ExportOut {
            account_id: AccountId::new(),
            from: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
            to: NaiveDate::from_ymd_opt(2026, 11, 2).unwrap(),
            lines: vec![ExportLine {
                date: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
                instance_id: Some("inst_1".into()),
                instance_name: Some("a".into()),
                counts: Counts { messages_queued: 3, attendant_tokens: 9, ..Counts::default() },
            }],
            next_cursor: None,
        };
        let text = csv(&out);
        let lines: Vec<&str> = text.split("\r\n").collect();
        assert!(lines[0].starts_with("date,instance_id,instance_name,messages_queued,"));
        assert!(lines[0].ends_with(",attendant_tokens"));
        assert!(lines[1].starts_with("2026-11-01,inst_1,a,3,"));
        assert!(lines[1].ends_with(",9"));
        assert_eq!(lines[0].split(',').count(), lines[1].split(',').count());
    }
}
