//! Publishing to a channel, whichever door the post comes through: the network says the
//! account owns or administers the channel, and each instance publishes at most 20 posts
//! a day (cluster-wide, `domain::caps`).

use std::time::Duration;

use serde::Deserialize;
use shared::bus::NetOp;
use shared::ids::InstanceId;
use shared::{ApiError, ErrorCode};

use crate::state::AppState;
use domain::caps::Cap;

/// Publications: 20 a day.
pub const PUBLICATIONS: Cap =
    Cap { name: "channel_posts", limit: 20, window: Duration::from_secs(86_400), what: "channel publications a day" };

#[derive(Deserialize)]
struct Role {
    role: Option<String>,
}

/// 403 `forbidden` unless the account owns or administers channel `jid` (asked of the
/// network through the session).
pub async fn check_publisher(state: &AppState, id: &InstanceId, jid: &str) -> Result<(), ApiError> {
    let c: Role = domain::net::net(state, id, NetOp::Channel { jid: jid.to_string() }).await?;
    if !matches!(c.role.as_deref(), Some("owner" | "admin")) {
        return Err(ApiError::new(ErrorCode::Forbidden, "only the channel's owner or an admin may publish"));
    }
    Ok(())
}
