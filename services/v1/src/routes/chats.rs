//! `{inst}/chats`, the door to `domain::chats`: chats and their history from the local log,
//! without asking the network; changes to a chat (archive, pin, mute, read, delete) go to the
//! network through the instance's worker first and are recorded once it accepted them. `{jid}`
//! is a JID or a phone number with country code.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use domain::chats::{self as core, ChatListOut, ChatOut};
use serde::Deserialize;
use shared::db::log::{self, ChatChange};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::history::{self, MessagePageOut};
use domain::page::{self, PageQuery};
use door::extract::{InstanceAccess, Path, ValidatedJson, ValidatedQuery};
use door::AppState;
use shared::jid::Jid;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(get_one, patch, delete))
        .routes(routes!(history))
        .routes(routes!(read))
}

/// Body of `PATCH {inst}/chats/{jid}`: absent fields stay.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatPatch {
    pub archived: Option<bool>,
    pub pinned: Option<bool>,
    /// Mute until then; `null` unmutes.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<DateTime<Utc>>)]
    pub muted_until: Option<Option<DateTime<Utc>>>,
    /// `true` marks the chat read (read receipts go to the senders), `false` unread.
    pub read: Option<bool>,
}

/// A present field, even `null`, is `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<DateTime<Utc>>>, D::Error> {
    Option::<DateTime<Utc>>::deserialize(d).map(Some)
}

/// A chat list cursor: (last message time, jid) of the page's last chat.
fn decode_chat_cursor(c: &str, inst: &InstanceId) -> Result<(DateTime<Utc>, String), ApiError> {
    let f = page::decode(c, &["c1", inst.as_str()], 4)?;
    Ok((page::parse_ts(&f[2])?, f[3].clone()))
}

/// The instance's chats, newest last message first.
#[utoipa::path(get, path = "/v1/instances/{id}/chats", tag = "chats",
    params(("id" = InstanceId, Path, description = "instance id"), PageQuery),
    responses(
        (status = 200, description = "a page of chats", body = ChatListOut),
        (status = 400, description = "`validation_failed`: bad limit, or a cursor that is not this list's", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn list(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedQuery(q): ValidatedQuery<PageQuery>,
) -> Result<Json<ChatListOut>, ApiError> {
    let id = &access.id;
    let limit = page::limit(q.limit, 50, 200)?;
    let after = q.cursor.as_deref().map(|c| decode_chat_cursor(c, id)).transpose()?;
    shared::db::instances::get(&state.db, id).await?.ok_or_else(ApiError::instance_not_found)?;
    let rows = log::chats(&state.db, id, after.as_ref().map(|(t, j)| (*t, j.as_str())), i64::from(limit) + 1).await?;
    let (rows, next_cursor) =
        page::page(rows, limit, |r| page::encode(&["c1", id.as_str(), &page::ts(r.last_message_at), r.jid.as_str()]));
    Ok(Json(ChatListOut { chats: core::with_labels(access.ctx(&state), rows).await?, next_cursor }))
}

/// A chat.
#[utoipa::path(get, path = "/v1/instances/{id}/chats/{jid}", tag = "chats",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 200, description = "the chat", body = ChatOut),
        (status = 400, description = "`validation_failed`: not a JID or number", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such chat in the log", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_one(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<ChatOut>, ApiError> {
    Ok(Json(core::get(access.ctx(&state), ids.1).await?))
}

/// Archive, pin, mute or mark a chat read/unread, on the network first.
#[utoipa::path(patch, path = "/v1/instances/{id}/chats/{jid}", tag = "chats",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = String, Path, description = "JID or phone number")),
    request_body = ChatPatch,
    responses(
        (status = 200, description = "the chat", body = ChatOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such chat in the log", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`: the session is not running", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn patch(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    ValidatedJson(p): ValidatedJson<ChatPatch>,
) -> Result<Json<ChatOut>, ApiError> {
    let change = ChatChange { archived: p.archived, pinned: p.pinned, muted_until: p.muted_until, read: p.read };
    Ok(Json(core::change(access.ctx(&state), ids.1, change).await?))
}

/// Delete a chat on the network, and its messages from the log.
#[utoipa::path(delete, path = "/v1/instances/{id}/chats/{jid}", tag = "chats",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 204, description = "deleted"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such chat in the log", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn delete(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<StatusCode, ApiError> {
    core::delete(access.ctx(&state), ids.1).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Mark a chat read: read receipts go to the senders; unread becomes 0.
#[utoipa::path(post, path = "/v1/instances/{id}/chats/{jid}/read", tag = "chats",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 200, description = "the chat", body = ChatOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such chat in the log", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn read(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<ChatOut>, ApiError> {
    let change = ChatChange { read: Some(true), ..ChatChange::default() };
    Ok(Json(core::change(access.ctx(&state), ids.1, change).await?))
}

/// A chat's messages from the log, newest first.
#[utoipa::path(get, path = "/v1/instances/{id}/chats/{jid}/messages", tag = "chats",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = String, Path, description = "JID or phone number"), PageQuery),
    responses(
        (status = 200, description = "a page of messages, newest first", body = MessagePageOut),
        (status = 400, description = "`validation_failed`: bad limit, or a cursor that is not this chat's", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn history(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    ValidatedQuery(q): ValidatedQuery<PageQuery>,
) -> Result<Json<MessagePageOut>, ApiError> {
    Ok(Json(history::page(&state, &access.id, ids.1.as_str(), &q).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_bound_to_their_list() {
        let a = InstanceId::new();
        let b = InstanceId::new();
        let t = Utc::now();
        let c = page::encode(&["c1", a.as_str(), &page::ts(t), shared::jid::Jid::user("123").as_str()]);
        assert_eq!(decode_chat_cursor(&c, &a).unwrap(), (t, shared::jid::Jid::user("123").as_str().to_string()));
        assert!(decode_chat_cursor(&c, &b).is_err());
        let m = shared::ids::MessageId::new();
        let c = page::encode(&["m1", a.as_str(), shared::jid::Jid::user("1").as_str(), &page::ts(t), m.as_str()]);
        assert_eq!(history::decode_message_cursor(&c, &a, shared::jid::Jid::user("1").as_str()).unwrap(), (t, m));
        assert!(history::decode_message_cursor(&c, &a, shared::jid::Jid::user("2").as_str()).is_err());
        assert!(history::decode_message_cursor("!!", &a, shared::jid::Jid::user("1").as_str()).is_err());
    }
}
