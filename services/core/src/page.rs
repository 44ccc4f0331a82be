//! Shared pagination: the `limit` bounds, the query every paginated route takes, opaque
//! cursors, and cutting a page.
//!
//! A cursor is the key fields of a page's last row, `|`-joined under a tag naming its
//! list (and the instance or parent it belongs to), base64url: a cursor of another list
//! fails to decode and is 400 `validation_failed`.

use crate::{Error, Result};
use base64::Engine;
use serde::Deserialize;

/// `limit` and `cursor` of a paginated route.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page size, 1-200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
}

/// `limit` and `cursor` of the delivery log (at most 100 a page).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SmallPageQuery {
    /// Page size, 1-100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
}

/// The page size: `default` when absent, 400 `validation_failed` outside 1..=`max`.
pub fn limit(requested: Option<u32>, default: u32, max: u32) -> Result<u32> {
    match requested {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(_) => Err(Error::invalid(format!("limit must be between 1 and {max}"))),
    }
}

/// A cursor of `fields` (the first names the list; none may contain `|`).
pub fn encode(fields: &[&str]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(fields.join("|"))
}

/// The fields of a cursor whose first `prefix.len()` fields equal `prefix` (its list),
/// and that has `n` fields in all; 400 `validation_failed` otherwise.
pub fn decode(c: &str, prefix: &[&str], n: usize) -> Result<Vec<String>> {
    let bad = || Error::invalid("invalid cursor");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(c).map_err(|_| bad())?;
    let s = String::from_utf8(raw).map_err(|_| bad())?;
    let fields: Vec<String> = s.splitn(n, '|').map(str::to_string).collect();
    if fields.len() != n || fields.iter().zip(prefix).any(|(f, p)| f != p) {
        return Err(bad());
    }
    Ok(fields)
}

/// A time as a cursor field (RFC 3339 to the microsecond, as Postgres keeps it).
pub fn time_field(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// A cursor field written by [`time_field`]; 400 `validation_failed` otherwise.
pub fn parse_time_field(f: &str) -> Result<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(f).map(|t| t.to_utc()).map_err(|_| Error::invalid("invalid cursor"))
}

/// A page from `limit + 1` rows: the first `limit`, and the cursor of the last of them
/// when there were more.
pub fn page<T>(mut rows: Vec<T>, limit: u32, cursor: impl Fn(&T) -> String) -> (Vec<T>, Option<String>) {
    if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        let next = rows.last().map(cursor);
        (rows, next)
    } else {
        (rows, None)
    }
}

/// A page of a whole list the network answered (groups, communities), ordered by `key`
/// (unique), after the cursor's key. `tag` keeps one list's cursors out of another.
pub fn page_by_key<T>(
    mut items: Vec<T>,
    q: &PageQuery,
    tag: &str,
    key: impl Fn(&T) -> &str,
) -> Result<(Vec<T>, Option<String>)> {
    let limit = limit(q.limit, 50, 200)?;
    let after = q.cursor.as_deref().map(|c| decode(c, &[tag], 2)).transpose()?.map(|f| f[1].clone());
    items.sort_by(|a, b| key(a).cmp(key(b)));
    items.retain(|i| after.as_deref().is_none_or(|a| key(i) > a));
    items.truncate(limit as usize + 1);
    Ok(page(items, limit, |i| encode(&[tag, key(i)])))
}

/// A timestamp as a cursor field, exactly (nanoseconds).
pub fn ts(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// A cursor field back to a timestamp.
pub fn parse_ts(s: &str) -> Result<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|_| Error::invalid("invalid cursor"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_stay_in_their_list() {
        let c = encode(&["m1", "inst_a", shared::jid::Jid::user("x").as_str(), "t", "id"]);
        assert_eq!(decode(&c, &["m1", "inst_a"], 5).unwrap()[4], "id");
        assert!(decode(&c, &["m1", "inst_b"], 5).is_err(), "another instance's");
        assert!(decode(&c, &["c1"], 5).is_err(), "another list's");
        assert!(decode(&c, &["m1"], 6).is_err(), "wrong shape");
        assert!(decode("!!", &["m1"], 1).is_err());
        let (rows, next) = page(vec![1, 2, 3], 2, |n| n.to_string());
        assert_eq!((rows, next.as_deref()), (vec![1, 2], Some("2")));
        assert_eq!(page(vec![1, 2], 2, |n| n.to_string()).1, None);
        let t = chrono::Utc::now();
        assert_eq!(parse_ts(&ts(t)).unwrap(), t);
    }
}
