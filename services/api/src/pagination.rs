//! Shared pagination rules: `limit` bounds (cursors are encoded by each resource).

use shared::ApiError;

/// The page size: `default` when absent, 400 `validation_failed` outside 1..=`max`.
pub fn limit(requested: Option<u32>, default: u32, max: u32) -> Result<u32, ApiError> {
    match requested {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::validation(format!("limit must be between 1 and {max}"))),
    }
}
