//! An instance's state changes, newest first (`GET {inst}/states`): its `instance.state`
//! events from the outbox, kept as long as events are (`bus::EVENTS_RETENTION`, 7 days).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::events::InstanceStateEventData;
use shared::ids::EventId;
use utoipa::ToSchema;

use crate::page::PageQuery;
use crate::{Ctx, Error, Result};

/// One change of state.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StateChangeOut {
    /// The `instance.state` event that told it.
    pub event_id: EventId,
    pub at: DateTime<Utc>,
    pub state: String,
    pub previous_state: String,
    /// Why, when that needed saying.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
}

/// A page of state changes, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StateHistoryOut {
    pub changes: Vec<StateChangeOut>,
    /// Absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub next_cursor: Option<String>,
}

/// A page of the instance's state changes, newest first.
pub async fn history(ctx: Ctx<'_>, q: &PageQuery) -> Result<StateHistoryOut> {
    let limit = crate::page::limit(q.limit, 50, 200)?;
    if !shared::db::instances::exists(&ctx.core.db, ctx.instance).await? {
        return Err(Error::InstanceNotFound);
    }
    let tag = ["s1", ctx.instance.as_str()];
    let before = match &q.cursor {
        Some(c) => {
            let f = crate::page::decode(c, &tag, 4)?;
            let bad = || Error::invalid("invalid cursor");
            let at = crate::page::parse_time_field(&f[2])?;
            Some((at, EventId::parse(&f[3]).map_err(|_| bad())?))
        }
        None => None,
    };
    let rows = shared::db::outbox::states(&ctx.core.db, ctx.instance, before, i64::from(limit) + 1).await?;
    let (rows, next_cursor) = crate::page::page(rows, limit, |(id, at, _)| {
        let at = crate::page::time_field(*at);
        crate::page::encode(&[tag[0], tag[1], at.as_str(), id.as_str()])
    });
    let changes = rows
        .into_iter()
        .filter_map(|(event_id, at, payload)| {
            // A row that no longer reads as its type is left out, not the page.
            let d: InstanceStateEventData = serde_json::from_value(payload.get("data")?.clone()).ok()?;
            Some(StateChangeOut { event_id, at, state: d.state, previous_state: d.previous_state, reason: d.reason })
        })
        .collect();
    Ok(StateHistoryOut { changes, next_cursor })
}
