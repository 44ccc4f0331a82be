//! Lenient deserializers for values that arrive as environment strings.

use std::time::Duration;

use serde::de::{DeserializeOwned, Error};
use serde::{Deserialize, Deserializer, Serializer};
use serde_with::{DeserializeAs, SerializeAs};

#[derive(Deserialize)]
#[serde(untagged)]
enum BoolLike {
    Bool(bool),
    Int(i64),
    Str(String),
}

/// Accepts `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`.
pub fn flexible_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match BoolLike::deserialize(d)? {
        BoolLike::Bool(b) => Ok(b),
        BoolLike::Int(0) => Ok(false),
        BoolLike::Int(1) => Ok(true),
        BoolLike::Str(s) => match s.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" | "" => Ok(false),
            _ => Err(D::Error::custom("expected a boolean (true/false, 1/0)")),
        },
        BoolLike::Int(_) => Err(D::Error::custom("expected a boolean (true/false, 1/0)")),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ListLike<T> {
    List(Vec<T>),
    Str(String),
}

/// Accepts a list, or a comma-separated string (from the environment).
pub fn list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + std::str::FromStr,
    T::Err: std::fmt::Display,
{
    match ListLike::<T>::deserialize(d)? {
        ListLike::List(v) => Ok(v),
        ListLike::Str(s) => s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| p.parse::<T>().map_err(|e| D::Error::custom(format!("invalid list item: {e}"))))
            .collect(),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum MillisLike {
    Number(u64),
    Str(String),
}

/// A duration key (`*_ms`): milliseconds as a number (`5000`, also from the environment),
/// or a humantime string (`"5s"`, `"1h 30m"`, `"250ms"`); written back as milliseconds.
pub struct Millis;

impl SerializeAs<Duration> for Millis {
    fn serialize_as<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

impl<'de> DeserializeAs<'de, Duration> for Millis {
    fn deserialize_as<D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match MillisLike::deserialize(d)? {
            MillisLike::Number(ms) => Ok(Duration::from_millis(ms)),
            MillisLike::Str(s) => match s.trim().parse::<u64>() {
                Ok(ms) => Ok(Duration::from_millis(ms)),
                Err(_) => humantime::parse_duration(s.trim())
                    .map_err(|_| D::Error::custom("expected milliseconds or a duration such as 5s, 1m 30s or 250ms")),
            },
        }
    }
}
