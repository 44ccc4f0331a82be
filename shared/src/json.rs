//! Parsing tenants' JSON bodies: the error names the field, never the value it held,
//! and no string may hold NUL (Postgres keeps none). The `http` feature's extractor and
//! every door use it.

use serde::de::DeserializeOwned;

use crate::ApiError;

/// [`parse_json`] of an optional body: none, only white space, or JSON `null` is
/// `T::default()`.
pub fn parse_json_or_default<T: DeserializeOwned + Default>(bytes: &[u8]) -> Result<T, ApiError> {
    if matches!(bytes.trim_ascii(), b"" | b"null") {
        return Ok(T::default());
    }
    parse_json(bytes)
}

/// Parses JSON with an error message that names the field but never echoes input values.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::validation("request body must be a JSON document"));
    }
    // Every body is an object (serde would take a struct from an array, field by field).
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::validation("request body must be a JSON object"));
    }
    // Text is stored in Postgres, which holds no NUL character: refused before anything.
    if has_escaped_nul(bytes) {
        return Err(ApiError::validation("strings must not contain the NUL character (U+0000)"));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(de);
    let first = match parsed {
        Ok(t) => return Ok(t),
        Err(e) => e,
    };
    // JSON Schema's `integer` includes `16.0`; serde's integers do not: a body whose
    // integral floats are written as integers is tried again.
    if first.inner().classify() == serde_json::error::Category::Data {
        if let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(bytes) {
            if integral_floats_as_integers(&mut v) {
                if let Ok(t) = serde_json::from_value(v) {
                    return Ok(t);
                }
            }
        }
    }
    Err(first).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let reason = sanitize_serde_message(&inner.to_string());
        let msg = match inner.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                format!("malformed JSON at line {} column {}", inner.line(), inner.column())
            }
            // The last path segment of an unknown field is the input's own key: drop it.
            _ if reason.starts_with("unknown field") => match path.rsplit_once('.') {
                Some((parent, _)) => format!("invalid object `{parent}`: {reason}"),
                None => format!("invalid request body: {reason}"),
            },
            _ if path == "." || path.is_empty() => format!("invalid request body: {reason}"),
            _ => return ApiError::validation(format!("invalid field `{path}`: {reason}")).with_field(path),
        };
        ApiError::validation(msg)
    })
}

/// Whether a JSON text holds a NUL character in a string: JSON writes it only as the
/// escape `\u0000` (a backslash that is not itself escaped, then `u0000`).
fn has_escaped_nul(bytes: &[u8]) -> bool {
    memchr::memmem::find_iter(bytes, br"\u0000")
        .any(|at| bytes[..at].iter().rev().take_while(|b| **b == b'\\').count() % 2 == 0)
}

/// A JSON number as JSON Schema's `integer` reads it: an integer, or a float with no
/// fraction (`16.0`) within the integers an f64 holds exactly.
pub fn integral(n: &serde_json::Number) -> Option<i64> {
    n.as_i64()
        .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0).map(|f| f as i64))
}

/// Rewrites every number that is a float with no fraction (`16.0`) as the integer it
/// is; whether any was.
fn integral_floats_as_integers(v: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::Number(n) if n.is_f64() => match integral(n) {
            Some(i) => {
                *v = Value::from(i);
                true
            }
            None => false,
        },
        Value::Array(a) => a.iter_mut().fold(false, |any, x| integral_floats_as_integers(x) | any),
        Value::Object(o) => o.values_mut().fold(false, |any, x| integral_floats_as_integers(x) | any),
        _ => false,
    }
}

/// Strips user-supplied values from serde's messages and its position suffix: values
/// may be phone numbers or secrets. serde quotes input before `, expected` (`invalid
/// type: integer `5511…``, `unknown variant `…``) and schema words after it; only
/// `missing field` and `duplicate field` quote a schema word before it.
pub fn sanitize_serde_message(msg: &str) -> String {
    let msg = msg.split(" at line ").next().unwrap_or(msg);
    let (head, tail) = match msg.find(", expected") {
        Some(i) => msg.split_at(i),
        None => (msg, ""),
    };
    if head.starts_with("missing field") || head.starts_with("duplicate field") {
        return msg.to_string();
    }
    let mut out = String::with_capacity(msg.len());
    let mut rest = head;
    while let Some(start) = rest.find(['"', '`']) {
        let quote = rest.as_bytes()[start] as char;
        out.push_str(&rest[..start]);
        out.push_str("(value)");
        let after = &rest[start + 1..];
        rest = after.find(quote).map_or("", |end| &after[end + 1..]);
    }
    out.push_str(rest);
    out.push_str(tail);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        count: u32,
        kind: Option<Kind>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Kind {
        Text,
    }

    #[test]
    fn json_errors_name_fields_not_values() {
        let e = parse_json::<Body>(br#"{"count": "5511999990001"}"#).unwrap_err();
        assert!(e.message.contains("`count`"), "{}", e.message);
        assert!(!e.message.contains("5511999990001"), "{}", e.message);
        let e = parse_json::<Body>(br#"{"count": 1, "kind": "5511999990001"}"#).unwrap_err();
        assert!(!e.message.contains("5511999990001"), "{}", e.message);
        assert!(e.message.contains("`text`"), "expected variants stay: {}", e.message);
        let e = parse_json::<Body>(br#"{"count": 1, "pl_inst_secret": 1}"#).unwrap_err();
        assert!(!e.message.contains("pl_inst_secret"), "{}", e.message);
        let e = parse_json::<Body>(br#"{"count": 5511999990001}"#).unwrap_err();
        assert!(!e.message.contains("5511999990001"), "{}", e.message);
        let e = parse_json::<Body>(br#"{}"#).unwrap_err();
        assert!(e.message.contains("missing field `count`"), "{}", e.message);
        let e = parse_json::<Body>(b"{not json").unwrap_err();
        assert!(e.message.starts_with("malformed JSON"), "{}", e.message);
        let e = parse_json::<Body>(b"").unwrap_err();
        assert_eq!(e.code, crate::ErrorCode::ValidationFailed);
        assert!(parse_json::<Body>(br#"{"count": 3}"#).is_ok());
        let e = parse_json::<Body>(b" [3, null]").unwrap_err();
        assert!(e.message.contains("JSON object"), "{}", e.message);
    }

    #[test]
    fn a_nul_in_any_string_is_refused_but_an_escaped_backslash_is_not_one() {
        for body in [&br#"{"count": 1, "kind": "a\u0000b"}"#[..], br#"{"x": {"y": ["\u0000"]}}"#, br#"{"\u0000": 1}"#] {
            let e = parse_json::<serde_json::Value>(body).unwrap_err();
            assert!(e.message.contains("NUL"), "{}", e.message);
        }
        assert!(parse_json::<serde_json::Value>(br#"{"a": "\\u0000"}"#).is_ok(), "a backslash, then u0000");
        assert!(parse_json::<serde_json::Value>(br#"{"a": "\\\u0000"}"#).is_err());
    }

    /// JSON Schema's integers include `16.0`: such a body is taken; a fraction is not.
    #[test]
    fn integral_floats_are_integers() {
        assert_eq!(parse_json::<Body>(br#"{"count": 16.0}"#).unwrap().count, 16);
        assert_eq!(parse_json::<Body>(br#"{"count": 1e2}"#).unwrap().count, 100);
        let e = parse_json::<Body>(br#"{"count": 16.5}"#).unwrap_err();
        assert!(e.message.contains("`count`"), "{}", e.message);
        assert!(parse_json::<Body>(br#"{"count": -1.0}"#).is_err(), "still a u32");
    }
}
