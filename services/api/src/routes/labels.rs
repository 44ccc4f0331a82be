//! `{inst}/labels`: a business account's labels (interface.md 4.4). Changes go to the
//! network through the instance's worker first, then are recorded in the local log with
//! their `label.updated` (`db::labels::apply`, which announces a change once even when the
//! network echoes it back). Reads come from the log, so they work while disconnected.
//! A personal account gets 409 `business_account_required`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::bus::NetOp;
use shared::db::labels::{self, Change, LabelRow};
use shared::error::ErrorBody;
use shared::ids::{InstanceId, MessageId};
use shared::jid::Jid;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{InstanceAccess, Path, ValidatedJson};
use crate::routes::business::require_business;
use crate::rpc::net;
use crate::state::AppState;

/// WhatsApp's label colours: an index into its palette of 20.
const COLORS: i32 = 20;
const NAME_LIMIT: usize = 100;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(edit, delete))
        .routes(routes!(label_chat, unlabel_chat))
        .routes(routes!(label_message, unlabel_message))
}

/// A label.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LabelOut {
    /// The network's id (a small integer as a string on WhatsApp).
    pub id: String,
    pub name: String,
    /// An index into WhatsApp's palette of 20 colours (0-19).
    pub color: i32,
}

impl From<LabelRow> for LabelOut {
    fn from(r: LabelRow) -> Self {
        LabelOut { id: r.label_id, name: r.name, color: r.color }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LabelListOut {
    pub labels: Vec<LabelOut>,
}

/// Body of `POST {inst}/labels`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelIn {
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    /// 0-19; 0 when absent.
    #[schema(minimum = 0, maximum = 19)]
    #[serde(default)]
    pub color: i32,
}

/// Body of `PATCH {inst}/labels/{label_id}`: absent fields stay.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelPatch {
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: Option<String>,
    #[schema(minimum = 0, maximum = 19)]
    pub color: Option<i32>,
}

fn check_name(name: &str) -> Result<String, ApiError> {
    if crate::schemas::trim_ecma(name).is_empty() || name.chars().count() > NAME_LIMIT {
        return Err(ApiError::validation(format!("name must be 1 to {NAME_LIMIT} characters, not only spaces")));
    }
    Ok(name.to_string())
}

fn check_color(color: i32) -> Result<i32, ApiError> {
    if !(0..COLORS).contains(&color) {
        return Err(ApiError::validation(format!("color must be 0 to {}", COLORS - 1)));
    }
    Ok(color)
}

/// A label id from the path: what the network uses (up to 64 letters, digits, `-`, `_`).
fn check_label_id(id: &str) -> Result<(), ApiError> {
    if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(ApiError::validation("label_id must be 1 to 64 letters, digits, '-' or '_'"));
    }
    Ok(())
}

/// The business check, then the label named in the path, which must exist.
async fn existing(state: &AppState, id: &InstanceId, label_id: &str) -> Result<LabelRow, ApiError> {
    check_label_id(label_id)?;
    require_business(state, id).await?;
    labels::get(&state.db, id, label_id).await?.ok_or_else(|| ApiError::not_found("label"))
}

/// Records a change the network accepted (with its event, once).
async fn record(state: &AppState, id: &InstanceId, change: Change) -> Result<(), ApiError> {
    labels::apply(&state.db, id, None, &change).await?;
    Ok(())
}

/// The account's labels, from the local log.
#[utoipa::path(get, path = "/v1/instances/{id}/labels", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the labels", body = LabelListOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`business_account_required`: a personal account; `instance_not_connected`: never paired", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn list(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<LabelListOut>, ApiError> {
    require_business(&state, &id).await?;
    let rows = labels::list(&state.db, &id).await?;
    Ok(Json(LabelListOut { labels: rows.into_iter().map(Into::into).collect() }))
}

/// Create a label, on the network first.
#[utoipa::path(post, path = "/v1/instances/{id}/labels", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = LabelIn,
    responses(
        (status = 201, description = "the label", body = LabelOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn create(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedJson(body): ValidatedJson<LabelIn>,
) -> Result<(StatusCode, Json<LabelOut>), ApiError> {
    let name = check_name(&body.name)?;
    let color = check_color(body.color)?;
    require_business(&state, &id).await?;
    let label_id = labels::next_id(&state.db, &id).await?;
    let op = NetOp::SetLabel { label_id: label_id.clone(), name: name.clone(), color };
    net::<serde_json::Value>(&state, &id, op).await?;
    record(&state, &id, Change::Edit { label_id: label_id.clone(), name: name.clone(), color }).await?;
    Ok((StatusCode::CREATED, Json(LabelOut { id: label_id, name, color })))
}

/// Rename or recolour a label, on the network first.
#[utoipa::path(patch, path = "/v1/instances/{id}/labels/{label_id}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id")),
    request_body = LabelPatch,
    responses(
        (status = 200, description = "the label as it is now", body = LabelOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn edit(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, String)>,
    ValidatedJson(p): ValidatedJson<LabelPatch>,
) -> Result<Json<LabelOut>, ApiError> {
    let label_id = ids.1;
    let name = p.name.as_deref().map(check_name).transpose()?;
    let color = p.color.map(check_color).transpose()?;
    let now = existing(&state, &id, &label_id).await?;
    let (name, color) = (name.unwrap_or(now.name), color.unwrap_or(now.color));
    net::<serde_json::Value>(&state, &id, NetOp::SetLabel { label_id: label_id.clone(), name: name.clone(), color })
        .await?;
    record(&state, &id, Change::Edit { label_id: label_id.clone(), name: name.clone(), color }).await?;
    Ok(Json(LabelOut { id: label_id, name, color }))
}

/// Delete a label (it comes off every chat and message), on the network first.
#[utoipa::path(delete, path = "/v1/instances/{id}/labels/{label_id}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id")),
    responses(
        (status = 204, description = "deleted"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn delete(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, String)>,
) -> Result<StatusCode, ApiError> {
    let label_id = ids.1;
    existing(&state, &id, &label_id).await?;
    net::<serde_json::Value>(&state, &id, NetOp::DeleteLabel { label_id: label_id.clone() }).await?;
    record(&state, &id, Change::Delete { label_id }).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Puts a label on a chat or takes it off.
pub(crate) async fn set_chat(
    state: &AppState,
    id: &InstanceId,
    label_id: String,
    jid: Jid,
    labeled: bool,
) -> Result<(), ApiError> {
    existing(state, id, &label_id).await?;
    let jid = String::from(jid);
    net::<serde_json::Value>(state, id, NetOp::LabelChat { label_id: label_id.clone(), jid: jid.clone(), labeled })
        .await?;
    record(state, id, Change::Target { label_id, chat_jid: jid, wa_message_id: None, labeled }).await
}

/// Label a chat (a JID or a phone number), on the network first.
#[utoipa::path(put, path = "/v1/instances/{id}/labels/{label_id}/chats/{jid}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id"),
        ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 204, description = "the chat has the label"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn label_chat(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, String, Jid)>,
) -> Result<StatusCode, ApiError> {
    set_chat(&state, &id, ids.1, ids.2, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Take a label off a chat, on the network first.
#[utoipa::path(delete, path = "/v1/instances/{id}/labels/{label_id}/chats/{jid}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id"),
        ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 204, description = "the chat does not have the label"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn unlabel_chat(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, String, Jid)>,
) -> Result<StatusCode, ApiError> {
    set_chat(&state, &id, ids.1, ids.2, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Puts a label on a logged message or takes it off.
async fn set_message(
    state: &AppState,
    id: &InstanceId,
    label_id: String,
    msg: MessageId,
    labeled: bool,
) -> Result<(), ApiError> {
    existing(state, id, &label_id).await?;
    let (chat_jid, wa_message_id) =
        shared::db::log::network_id(&state.db, id, &msg).await?.ok_or_else(|| ApiError::not_found("message"))?;
    let op = NetOp::LabelMessage {
        label_id: label_id.clone(),
        jid: chat_jid.clone(),
        wa_message_id: wa_message_id.clone(),
        labeled,
    };
    net::<serde_json::Value>(state, id, op).await?;
    record(state, id, Change::Target { label_id, chat_jid, wa_message_id: Some(wa_message_id), labeled }).await
}

/// Label a message of the local log (its `msg_` id), on the network first.
#[utoipa::path(put, path = "/v1/instances/{id}/labels/{label_id}/messages/{msg_id}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id"),
        ("msg_id" = MessageId, Path, description = "a message of the local log")),
    responses(
        (status = 204, description = "the message has the label"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label or message", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn label_message(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, String, MessageId)>,
) -> Result<StatusCode, ApiError> {
    set_message(&state, &id, ids.1, ids.2, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Take a label off a message of the local log, on the network first.
#[utoipa::path(delete, path = "/v1/instances/{id}/labels/{label_id}/messages/{msg_id}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id"),
        ("msg_id" = MessageId, Path, description = "a message of the local log")),
    responses(
        (status = 204, description = "the message does not have the label"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label or message", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn unlabel_message(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, String, MessageId)>,
) -> Result<StatusCode, ApiError> {
    set_message(&state, &id, ids.1, ids.2, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_colours_and_ids_are_checked() {
        assert!(check_name("Paid").is_ok());
        assert!(check_name("   ").is_err());
        assert!(check_name(&"x".repeat(101)).is_err());
        assert!(check_name(&"é".repeat(100)).is_ok(), "characters, not bytes");
        assert_eq!(check_color(19).unwrap(), 19);
        assert!(check_color(20).is_err() && check_color(-1).is_err());
        assert!(check_label_id("12").is_ok() && check_label_id("a_b-1").is_ok());
        assert!(
            check_label_id("").is_err() && check_label_id("1 2").is_err() && check_label_id(&"1".repeat(65)).is_err()
        );
    }
}
