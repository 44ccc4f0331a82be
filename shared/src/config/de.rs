//! Lenient deserializers for values that arrive as environment strings.

use serde::de::{DeserializeOwned, Error};
use serde::{Deserialize, Deserializer};

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
